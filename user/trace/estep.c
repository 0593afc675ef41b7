/* One single-step of one thread, and the lines it produces.
 *
 * - A step's lines are committed when the step completes (a step trap).  A
 *   signal-delivery-stop after a step means the instruction did not
 *   complete: either a signal was already pending (nothing ran; the next
 *   step delivers it and stops before the handler's first instruction), or
 *   the instruction raised it (a fault, ud2, int3, a divide error): then it
 *   was executed, and gets its exec line and the lines of the accesses it
 *   completed (docs/trace-format.md).
 * - Syscalls run asynchronously with PTRACE_SYSCALL to their exit stop
 *   (they may block until another thread acts, and Ctrl-C and --duration
 *   must still be seen); their lines are committed when issued.
 * - The step itself (pushf's TF, cpuid under KVM) is ptrace/step.h's.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>

#include "common/log.h"
#include "ptrace/mem.h"
#include "ptrace/regs.h"
#include "ptrace/step.h"
#include "ptrace/wait.h"
#include "trace/cpu.h"
#include "trace/engine_int.h"

struct pending {
	const struct gb_insn *insn;
	uint64_t pc;
	bool in_range;
	struct gb_access acc[GB_MAX_ACCESSES];
	int nacc;
	uint64_t rflags_before;
};

static void maybe_snap(struct gb_engine *e, size_t i, uint64_t pc, bool inr)
{
	bool take = false;
	for (size_t k = 0; k < e->o.nsnap_pcs; k++)
		if (!e->snap_pc_done[k] && e->o.snap_pcs[k] == pc) {
			e->snap_pc_done[k] = true;
			take = true;
		}
	while (inr && e->snap_vt_next < e->o.nsnap_vts && e->o.snap_vts[e->snap_vt_next] <= e->vt) {
		take |= e->o.snap_vts[e->snap_vt_next] == e->vt;
		e->snap_vt_next++;
	}
	if (!take || !e->o.snap_cb)
		return;
	/* A snapshot sees every thread stopped and the program's own page
	 * protections. */
	enum tstate *was = calloc(e->t->nthreads + 1, sizeof(*was));
	if (!was)
		return;
	gb_jsonl__flush(e->out);
	eng_stop_world(e, was);
	bool lifted = TRAP_OPS(e)->snap_begin && TRAP_OPS(e)->snap_begin(e->trap, e, i);
	if (e->o.snap_cb(e->o.snap_ctx, e->t, eng_tid(e, i), e->vt, pc))
		gb_warn("snapshot at vt %llu (pc 0x%llx) failed", (unsigned long long)e->vt,
			(unsigned long long)pc);
	if (lifted)
		TRAP_CALL(e, snap_end, i);
	eng_resume_world(e, was);
	free(was);
}

static void commit(struct gb_engine *e, size_t i, const struct pending *p, enum eng_vals_how how)
{
	if (p->in_range && e->vals) {
		eng_vals_commit(e, i, p->pc, p->insn, p->acc, p->nacc, how);
		return;
	}
	if (p->in_range) {
		eng_commit(e, i, p->pc, p->acc, p->nacc);
		return;
	}
	eng_vals_unsync(e, i);
	for (int k = 0; k < p->nacc; k++)
		if (p->acc[k].write)
			gb_icache__note_write(e->ic, p->acc[k].addr, p->acc[k].size);
}

/* Events (clone, fork, exec...) that a step of thread i passes. */
struct step_ctx {
	struct gb_engine *e;
	size_t i;
};

static void step_event(void *ctx, const struct gb_stop *st)
{
	struct step_ctx *c = ctx;
	eng_event(c->e, c->i, st);
}

/* Wait for the stop that ends req of thread i; false (the trace ends with
 * an error) when it cannot be waited for. */
static bool step_wait(struct gb_engine *e, size_t i, int req, struct gb_stop *st)
{
	struct step_ctx c = { e, i };
	int r = gb_step_wait(e->t->threads[i].tid, req, step_event, &c, st);
	if (r) {
		gb_err("trace: waiting for thread %d: %s", e->t->threads[i].tid, strerror(-r));
		eng_finish(e, GB_END_ERROR);
	}
	return !r;
}

static int prepare(struct gb_engine *e, size_t i, const struct user_regs_struct *regs,
		   struct pending *p)
{
	pid_t tid = eng_tid(e, i);
	struct gb_cpu cpu;
	struct gb_vec vec;
	int err = 0;
	p->nacc = 0;
	p->insn = gb_icache__get(e->ic, tid, p->pc, &err);
	if (!p->insn)
		return 0;
	gb_cpu_from_regs(&cpu, regs);
	if (p->insn->flags & GB_INSN_NEEDS_VEC) {
		if (!p->in_range) {
			gb_icache__bump(e->ic); /* a scatter may write code: re-check */
			return 0;
		}
		if ((err = gb_vec_read(tid, &vec))) {
			gb_err("trace: thread %d at 0x%llx: cannot read its vector registers: %s", tid,
			       (unsigned long long)p->pc, strerror(-err));
			return err;
		}
		cpu.vec = &vec;
	}
	int n = gb_insn_accesses(p->insn, &cpu, p->acc, GB_MAX_ACCESSES);
	if (n < 0 && p->in_range) {
		char text[128];
		gb_insn_format(p->insn, text, sizeof(text));
		gb_err("trace: 0x%llx (%s): cannot compute its memory accesses: %s",
		       (unsigned long long)p->pc, text, strerror(-n));
		return n;
	}
	p->nacc = n > 0 ? n : 0;
	if (p->in_range && e->vals)
		eng_vals_before(e, i, regs, p->acc, p->nacc);
	return 0;
}


/* A syscall instruction: run thread i to its syscall-entry stop, so that
 * the instruction is known to have executed (a signal already pending is
 * delivered first, and then the syscall runs later, after the handler: it
 * must not be logged twice).  Then the range is given up for the others
 * while it may block (under the page trap the syscall instruction sits on
 * the pages: it is in the kernel now, and the loop re-protects the pages
 * through a held thread before anyone runs natively).  false when the
 * thread did not get there (its signal is pending, or it died). */
static bool enter_syscall(struct gb_engine *e, size_t i)
{
	pid_t tid = e->t->threads[i].tid;
	struct gb_stop st;
	if (ptrace(PTRACE_SYSCALL, tid, 0, 0) || !step_wait(e, i, PTRACE_SYSCALL, &st))
		return false;
	/* The trap's own signal, queued before it stopped: dropped, and once
	 * more. */
	if (trap_classify(e, i, &st, GB_AT_SYSCALL, st.fault_addr) == GB_TRAP_SWALLOW &&
	    (ptrace(PTRACE_SYSCALL, tid, 0, 0) || !step_wait(e, i, PTRACE_SYSCALL, &st)))
		return false;
	if (st.kind != GB_STOP_SYSCALL) {
		if (st.kind == GB_STOP_SIGNAL && !eng_claim_watch(e, tid, st.sig))
			eng_keep_signal(e, i, st.sig);
		else if (st.kind == GB_STOP_EXITED || st.kind == GB_STOP_KILLED)
			eng_on_exit(e, i, &st);
		return false;
	}
	if (e->owner == (ssize_t)i && eng_live(e) > 1) {
		TRAP_CALL(e, yield, i); /* it may block: the others go on */
		eng_set_owner(e, -1);
	}
	return true;
}

/* A signal for owner i at a syscall instruction (p): taken first, on its
 * own, no instruction run.  A step with it would also run the syscall when
 * the signal enters no handler (SIGCONT, SIGCHLD, an ignored one), and a
 * syscall that blocks (a read another thread answers) would hold the step,
 * and every other thread with it.  Then the handler is run as after a step
 * into it, or the next step finds the syscall (the syscall way). */
static void take_signal_first(struct gb_engine *e, size_t i, const struct pending *p, int sig)
{
	pid_t tid = eng_tid(e, i);
	struct gb_stop st;
	struct user_regs_struct r;
	TRAP_CALL(e, deliver, i, p->pc, p->in_range, sig);
	eng_vals_unsync(e, i);
	int err = gb_step_deliver(tid, sig, &st);
	if (err) {
		eng_set_state(e, i, T_DYING); /* killed under us */
		return;
	}
	switch (st.kind) {
	case GB_STOP_EXITED:
	case GB_STOP_KILLED:
		eng_on_exit(e, i, &st);
		break;
	case GB_STOP_GROUP:
		eng_listen(e, i); /* a stop signal: stopped until SIGCONT */
		break;
	case GB_STOP_SIGNAL:
		eng_keep_signal(e, i, st.sig);
		break;
	default:
		/* At its handler's first instruction, or where it was. */
		if (gb_regs_get(tid, &r) == 0 && r.rip != p->pc)
			eng_handler_run(e, i, p->pc, p->rflags_before);
		break;
	}
}

static int faulted_accesses(const struct pending *p, const struct gb_stop *st, uint64_t rip)
{
	return p->insn ? eng_fault_done(p->pc, p->insn->len, p->acc, p->nacc, st, rip) : -1;
}

void eng_step(struct gb_engine *e, size_t i)
{
	/* No pointer into e->t->threads is kept: a step can add a thread
	 * (a clone on the way), which may move the array. */
	pid_t tid = e->t->threads[i].tid;
	struct user_regs_struct regs;
	struct pending p;

	if (gb_regs_get(tid, &regs)) {
		/* Killed under us: its exit status comes through waitpid. */
		eng_set_state(e, i, T_DYING);
		return;
	}
	p.pc = regs.rip;
	if (gb_regs_restarting_syscall(&regs))
		p.pc -= 2; /* the kernel rewinds to the syscall instruction on resume */
	p.in_range = eng_in_range(e, p.pc);
	p.rflags_before = regs.eflags;

	/* Ownership of the range: one thread inside at a time.  The owner gives
	 * it up when it leaves its ground (the range, or what the trap covers),
	 * or when the trap's policy says so (trap.h "keep").  Every turn steps
	 * at least one instruction. */
	bool inside = eng_inside(e, p.pc);
	if (TRAP_OPS(e)->keep)
		inside = TRAP_OPS(e)->keep(e->trap, e, i, e->owner == (ssize_t)i, p.pc, p.in_range,
					   inside);
	if (e->owner == (ssize_t)i && !inside) {
		if (eng_handler_frame_left(e, i, &regs))
			return; /* (still the owner: to its rt_sigreturn, natively) */
		eng_set_owner(e, -1);
		if (trap_native(e))
			return; /* runs natively again (the scheduler re-arms first) */
	} else if (e->owner < 0 && inside && !trap_native(e)) {
		eng_set_owner(e, (ssize_t)i);
	}

	if (e->o.nsnap_pcs || (p.in_range && e->o.nsnap_vts))
		maybe_snap(e, i, p.pc, p.in_range);
	if (prepare(e, i, &regs, &p)) {
		eng_finish(e, GB_END_ERROR);
		return;
	}

	int sig = eng_take_signal(e, i);
	uint32_t fl = p.insn ? p.insn->flags : 0;
	bool is_sys = fl & GB_INSN_SYSCALL;
	struct gb_stop st;
	if (sig && is_sys) {
		take_signal_first(e, i, &p, sig);
		return;
	}
	e->st.steps++;

	if (!sig && is_sys) {
		/* Its exit is asynchronous: it may block (until another thread
		 * acts, or for ever), and the loop must still see Ctrl-C and
		 * --duration.  Other threads may use the range meanwhile.
		 * PTRACE_SYSCALL, not a step: a thread blocked in the kernel then
		 * carries no pending step trap that a detach could leave behind
		 * (it would kill the program with SIGTRAP).  Its exit stop
		 * completes it (ethreads.c). */
		if (!enter_syscall(e, i))
			return;
		commit(e, i, &p, ENG_VALS_SYSCALL);
		gb_icache__bump(e->ic);
		eng_resume(e, i, PTRACE_SYSCALL, 0, T_SYSCALL);
		return;
	}
	TRAP_CALL(e, deliver, i, p.pc, p.in_range, sig);
	struct gb_step_insn si = {
		.pushf = fl & GB_INSN_PUSHF, .cpuid = fl & GB_INSN_CPUID,
		.len = p.insn ? p.insn->len : 0, .rflags = p.rflags_before,
	};
	struct step_ctx sc = { e, i };
	int r = gb_step(tid, sig, p.insn ? &si : NULL, step_event, &sc, &st);
	if (r == -ESRCH) {
		eng_set_state(e, i, T_DYING); /* killed under us */
		return;
	}
	if (r) {
		gb_err("trace: stepping thread %d: %s", tid, strerror(-r));
		eng_finish(e, GB_END_ERROR);
		return;
	}
	/* Is the stop the trap's?  (Over a probed address uprobes end the step
	 * with a SIGTRAP of their own: it is the step's stop.) */
	enum gb_trap_verdict v = trap_classify(e, i, &st, GB_AT_STEP, p.pc);
	if (v == GB_TRAP_STEP)
		st.kind = GB_STOP_STEP;

	switch (st.kind) {
	case GB_STOP_STEP:
		/* With a signal that has a handler the step only entered it (no
		 * instruction ran); an ignored one was dropped and it ran. */
		if (!sig || gb_step_ran(&st))
			commit(e, i, &p, ENG_VALS_DONE);
		else
			eng_handler_run(e, i, p.pc, p.rflags_before); /* (a handler off the ground: natively) */
		break;
	case GB_STOP_SIGNAL: {
		if (v == GB_TRAP_SWALLOW)
			break; /* the trap's own signal from before it owned the
				* range: nothing ran, step again */
		if (v == GB_TRAP_WATCH) {
			gb_icache__bump(e->ic); /* it changed the range's pages: applied */
			break;
		}
		eng_keep_signal(e, i, st.sig);
		struct user_regs_struct after;
		int done = sig || gb_regs_get(tid, &after) ? -1 : faulted_accesses(&p, &st, after.rip);
		if (done >= 0) {
			p.nacc = done;
			commit(e, i, &p, ENG_VALS_FAULTED);
		}
		gb_info("trace: thread %d: signal %d (code %d, addr 0x%llx) at pc 0x%llx while stepping%s",
			tid, st.sig, st.code, (unsigned long long)st.fault_addr, (unsigned long long)p.pc,
			done >= 0 ? " (raised by the instruction)" : "");
		break;
	}
	case GB_STOP_GROUP:
		eng_listen(e, i);
		break;
	case GB_STOP_EXITED:
	case GB_STOP_KILLED:
		eng_on_exit(e, i, &st); /* (syscalls, exit among them, went the async way) */
		break;
	default:
		break;
	}
	if (sig || st.kind != GB_STOP_STEP)
		eng_vals_unsync(e, i); /* a handler entered, a signal kept */
	if (eng_state(e, i) == T_STOPPED)
		eng_th(e, i)->stepped = true; /* until its next resume */
}
