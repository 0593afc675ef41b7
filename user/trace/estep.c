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

static bool stale_entry_fault(struct gb_engine *e, size_t i, const struct gb_stop *st, uint64_t pc);

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
	bool was_armed = e->trap && gb_pagetrap__touched(e->trap);
	if (was_armed)
		eng_disarm(e, (ssize_t)i);
	if (e->o.snap_cb(e->o.snap_ctx, e->t, e->t->threads[i].tid, e->vt, pc))
		gb_warn("snapshot at vt %llu (pc 0x%llx) failed", (unsigned long long)e->vt,
			(unsigned long long)pc);
	if (was_armed && e->owner != (ssize_t)i)
		eng_arm(e, (ssize_t)i);
	eng_resume_world(e, was);
	free(was);
}

void eng_commit(struct gb_engine *e, size_t i, uint64_t pc, const struct gb_access *acc, int nacc)
{
	for (int k = 0; k < nacc; k++)
		if (acc[k].write)
			gb_icache__note_write(e->ic, acc[k].addr, acc[k].size);
	struct ethread *t = &e->et[i];
	if (t->vcpu < 0)
		t->vcpu = (int)e->next_vcpu++;
	gb_jsonl__exec(e->out, (uint32_t)t->vcpu, pc, e->vt);
	for (int k = 0; k < nacc; k++)
		gb_jsonl__mem(e->out, acc[k].write, (uint32_t)t->vcpu, acc[k].addr, acc[k].size, pc, e->vt);
	if (e->o.faults_cb)
		e->o.faults_cb(e->o.faults_ctx, e, e->t->threads[i].tid, (uint32_t)t->vcpu, pc, e->vt);
	e->vt++;
}

static void commit(struct gb_engine *e, size_t i, const struct pending *p)
{
	if (p->in_range) {
		eng_commit(e, i, p->pc, p->acc, p->nacc);
		return;
	}
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

static int prepare(struct gb_engine *e, pid_t tid, const struct user_regs_struct *regs,
		   struct pending *p)
{
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
	return 0;
}


/* Under the probe trap, a signal delivered to the owner inside the range
 * runs a handler that may return into the range's middle, where no probe
 * is: the owner keeps the range while it runs the handler (stepped, lines
 * not emitted) until it is back; a handler that runs long (or leaves for
 * good) gets a probe at the return address instead. */
static void enter_handler(struct gb_engine *e, size_t i, const struct pending *p, int sig)
{
	struct ethread *t = &e->et[i];
	if (!sig || !e->probes || !p->in_range || t->in_handler)
		return;
	t->in_handler = true;
	t->handler_ret = p->pc;
	t->handler_steps = 0;
}

/* The owner in a handler left the range: a probe at the return address. */
static void leave_handler(struct gb_engine *e, size_t i)
{
	struct ethread *t = &e->et[i];
	if (!t->in_handler)
		return;
	t->in_handler = false;
	gb_probes__add_entry(e->probes, t->handler_ret);
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
	/* Our entry fault, queued before it stopped: dropped, and once more. */
	if (st.kind == GB_STOP_SIGNAL && stale_entry_fault(e, i, &st, st.fault_addr) &&
	    (ptrace(PTRACE_SYSCALL, tid, 0, 0) || !step_wait(e, i, PTRACE_SYSCALL, &st)))
		return false;
	if (st.kind != GB_STOP_SYSCALL) {
		if (st.kind == GB_STOP_SIGNAL && !eng_claim_watch(e, tid, st.sig))
			e->t->threads[i].pending_sig = st.sig;
		else if (st.kind == GB_STOP_EXITED || st.kind == GB_STOP_KILLED)
			eng_on_exit(e, i, &st);
		return false;
	}
	if (e->owner == (ssize_t)i && eng_live(e) > 1) {
		leave_handler(e, i); /* it may block: the others go on */
		eng_set_owner(e, -1);
	}
	return true;
}

/* A thread that faulted at the armed trap just before it was interrupted
 * still has that SIGSEGV queued; it surfaces at its first step as owner.
 * Dropped once per pc: a second one at the same pc is the program's own. */
static bool stale_entry_fault(struct gb_engine *e, size_t i, const struct gb_stop *st, uint64_t pc)
{
	struct ethread *t = &e->et[i];
	if (!e->trap || !gb_pagetrap__is_fetch_fault(e->trap, st, pc) || t->stale_pc == pc)
		return false;
	t->stale_pc = pc;
	return true;
}

/* After a step that ended in a signal-delivery-stop with no signal given:
 * did the instruction itself raise it (a synchronous exception: ud2,
 * int3, a faulting access, a divide error, a general-protection fault)?
 * Then it was executed: its exec line is written, with the lines of the
 * accesses it completed before the fault (docs/trace-format.md).  Returns
 * how many of p's accesses completed, or -1 when the signal is not the
 * instruction's (it came from outside, or the fetch itself faulted). */
int eng_fault_done(uint64_t pc, uint8_t len, const struct gb_access *acc, int nacc,
		   const struct gb_stop *st, uint64_t rip)
{
	if (st->code <= 0) /* SI_USER, SI_TKILL, SI_QUEUE: sent, not raised */
		return -1;
	switch (st->sig) {
	case SIGTRAP: /* int3 (SI_KERNEL): a trap, rip is past it */
		return rip == pc + len ? 0 : -1;
	case SIGILL:
		return rip == pc ? 0 : -1;
	case SIGFPE: /* #DE after the divisor was read */
		return rip == pc ? nacc : -1;
	case SIGSEGV:
	case SIGBUS:
		if (rip != pc)
			return -1;
		if (st->fault_addr >= pc && st->fault_addr < pc + len) {
			/* The fetch faulted, unless an access covers it too. */
			bool data = false;
			for (int k = 0; k < nacc; k++)
				data |= st->fault_addr >= acc[k].addr &&
					st->fault_addr < acc[k].addr + acc[k].size;
			if (!data)
				return -1;
		}
		for (int k = 0; k < nacc; k++)
			if (st->fault_addr >= acc[k].addr && st->fault_addr < acc[k].addr + acc[k].size)
				return k;
		return 0; /* #GP (si_addr 0), alignment: before any access */
	default:
		return -1;
	}
}

static int faulted_accesses(const struct pending *p, const struct gb_stop *st, uint64_t rip)
{
	return p->insn ? eng_fault_done(p->pc, p->insn->len, p->acc, p->nacc, st, rip) : -1;
}

void eng_emit_hit(struct gb_engine *e, size_t i)
{
	struct ethread *t = &e->et[i];
	struct pending p;
	struct user_regs_struct now;
	struct gb_cpu cpu;
	int err = 0;
	if (!t->has_hit)
		return;
	t->has_hit = false;
	p.pc = t->hit.addr;
	p.in_range = eng_in_range(e, p.pc);
	p.nacc = 0;
	if (!p.in_range)
		return;
	if (gb_regs_get(e->t->threads[i].tid, &now)) {
		eng_set_state(e, i, T_DYING); /* killed meanwhile: its exit comes */
		return;
	}
	p.insn = gb_icache__get(e->ic, e->t->threads[i].tid, p.pc, &err);
	if (!p.insn) {
		if (err == -ESRCH) {
			eng_set_state(e, i, T_DYING);
			return;
		}
		gb_err("trace: thread %d: the entry at 0x%llx cannot be decoded: %s",
		       e->t->threads[i].tid, (unsigned long long)p.pc, strerror(err ? -err : ESRCH));
		eng_finish(e, GB_END_ERROR);
		return;
	}
	/* The BPF program saw the registers before the instruction; the
	 * segment bases cannot have changed since (entries are checked). */
	gb_probe_hit__complete(&t->hit, &now);
	gb_cpu_from_regs(&cpu, &t->hit.regs);
	int n = gb_insn_accesses(p.insn, &cpu, p.acc, GB_MAX_ACCESSES);
	if (n < 0) {
		gb_err("trace: entry at 0x%llx: cannot compute its memory accesses: %s",
		       (unsigned long long)p.pc, strerror(-n));
		eng_finish(e, GB_END_ERROR);
		return;
	}
	p.nacc = n;
	/* A probed instruction that faulted: its signal came first (the
	 * handler has been set up since); it gets its exec line and the lines
	 * of the accesses it completed, as when stepped. */
	if (t->fault_seen && t->fault_pc == p.pc) {
		int done = faulted_accesses(&p, &t->fault, p.pc);
		if (done >= 0)
			p.nacc = done;
	}
	t->fault_seen = false;
	commit(e, i, &p);
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
	 * it up when it leaves (the range itself under the probe trap; the
	 * trapped pages under the page trap), and under the page trap also,
	 * when other threads live, when it steps out of the range itself while
	 * still on the pages (code sharing a page with the range), or after
	 * GB_OWNER_OUT_BUDGET such steps: re-protected, it faults again at once
	 * and queues behind the threads already waiting, so a thread looping on
	 * the range's page cannot starve the others.  Every turn steps at least
	 * one instruction. */
	bool inside = eng_inside(e, p.pc);
	struct ethread *et = &e->et[i];
	if (et->in_handler && e->owner == (ssize_t)i) {
		if (p.pc == et->handler_ret || p.in_range)
			et->in_handler = false; /* back */
		else if (++et->handler_steps < GB_HANDLER_BUDGET)
			inside = true; /* still in the handler: keep the range */
		else
			leave_handler(e, i);
	}
	if (e->owner == (ssize_t)i && inside && e->trap && !p.in_range && eng_live(e) > 1 &&
	    (et->last_in_range || et->out_steps >= GB_OWNER_OUT_BUDGET))
		inside = false;
	et->last_in_range = p.in_range;
	et->out_steps = p.in_range ? 0 : et->out_steps + 1;
	if (e->owner == (ssize_t)i && !inside) {
		eng_set_owner(e, -1);
		if (eng_trapped(e))
			return; /* runs natively again (the scheduler re-arms first) */
	} else if (e->owner < 0 && inside && !eng_trapped(e)) {
		eng_set_owner(e, (ssize_t)i);
	}

	if (e->o.nsnap_pcs || (p.in_range && e->o.nsnap_vts))
		maybe_snap(e, i, p.pc, p.in_range);
	if (prepare(e, tid, &regs, &p)) {
		eng_finish(e, GB_END_ERROR);
		return;
	}

	int sig = eng_take_signal(e, i);
	uint32_t fl = p.insn ? p.insn->flags : 0;
	bool is_sys = fl & GB_INSN_SYSCALL;
	struct gb_stop st;
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
		commit(e, i, &p);
		gb_icache__bump(e->ic);
		eng_set_state(e, i, T_SYSCALL);
		ptrace(PTRACE_SYSCALL, tid, 0, 0);
		return;
	}
	enter_handler(e, i, &p, sig);
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
	/* Over a probed address uprobes end the step with a SIGTRAP of their
	 * own: it is the step's stop. */
	if (e->probes && gb_probes__step_artifact(e->probes, &st, p.pc))
		st.kind = GB_STOP_STEP;

	switch (st.kind) {
	case GB_STOP_STEP:
		/* With a signal that has a handler the step only entered it (no
		 * instruction ran); an ignored one was dropped and it ran. */
		e->et[i].stale_pc = 0;
		if (!sig || gb_step_ran(&st))
			commit(e, i, &p);
		break;
	case GB_STOP_SIGNAL: {
		if (stale_entry_fault(e, i, &st, p.pc))
			break; /* our own trap's fault, queued before it stopped */
		struct gb_probe_hit late;
		if (e->probes && gb_probes__claim(e->probes, &st, &late))
			break; /* a probe's signal from before it owned the range
				* (its hit taken early): nothing ran, step again */
		if (eng_claim_watch(e, tid, st.sig))
			break; /* it changed the range's pages: applied */
		e->t->threads[i].pending_sig = st.sig;
		struct user_regs_struct after;
		int done = sig || gb_regs_get(tid, &after) ? -1 : faulted_accesses(&p, &st, after.rip);
		if (done >= 0) {
			p.nacc = done;
			commit(e, i, &p);
		}
		gb_info("trace: thread %d: signal %d (code %d, addr 0x%llx) at pc 0x%llx while stepping%s",
			tid, st.sig, st.code, (unsigned long long)st.fault_addr, (unsigned long long)p.pc,
			done >= 0 ? " (raised by the instruction)" : "");
		break;
	}
	case GB_STOP_GROUP:
		eng_set_state(e, i, T_GROUP);
		ptrace(PTRACE_LISTEN, tid, 0, 0);
		break;
	case GB_STOP_EXITED:
	case GB_STOP_KILLED:
		eng_on_exit(e, i, &st); /* (syscalls, exit among them, went the async way) */
		break;
	default:
		break;
	}
}
