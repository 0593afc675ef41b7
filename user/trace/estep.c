/* One single-step of one thread, and the lines it produces.
 *
 * - A step's lines are committed only when the step completes (a step trap,
 *   or the exit of the process from exit/exit_group): a signal-delivery-stop
 *   after a step means the instruction did not execute (it faulted, or a
 *   signal was already pending); the next step delivers the signal and
 *   stops before the handler's first instruction.
 * - Stepping `syscall` reports the trap at syscall exit.  Syscalls are
 *   stepped asynchronously (they may block until another thread acts, and
 *   Ctrl-C and --duration must still be seen); their lines are committed
 *   when issued.
 * - pushf pushes TF=1: bit 8 of the pushed word is cleared after the step.
 * - cpuid runs to a breakpoint after it (a step over cpuid may run one more
 *   instruction under KVM).
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
#include "ptrace/wait.h"
#include "trace/cpu.h"
#include "trace/engine_int.h"

static int finish_step(struct gb_engine *e, size_t i, struct gb_stop *st, int req);
static bool stale_entry_fault(struct gb_engine *e, size_t i, const struct gb_stop *st, uint64_t pc);

struct pending {
	const struct gb_insn *insn;
	uint64_t pc;
	bool in_range;
	struct gb_access acc[GB_MAX_ACCESSES];
	int nacc;
	uint64_t rflags_before;
};

static inline bool in_range(const struct gb_engine *e, uint64_t pc)
{
	return (!e->o.has_start || pc >= e->o.start) && (!e->o.has_end || pc <= e->o.end);
}

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

static void commit(struct gb_engine *e, size_t i, const struct pending *p)
{
	for (int k = 0; k < p->nacc; k++)
		if (p->acc[k].write)
			gb_icache__note_write(e->ic, p->acc[k].addr, p->acc[k].size);
	if (!p->in_range)
		return;
	struct ethread *t = &e->et[i];
	if (t->vcpu < 0)
		t->vcpu = (int)e->next_vcpu++;
	gb_jsonl__exec(e->out, (uint32_t)t->vcpu, p->pc, e->vt);
	for (int k = 0; k < p->nacc; k++)
		gb_jsonl__mem(e->out, p->acc[k].write, (uint32_t)t->vcpu, p->acc[k].addr,
			      p->acc[k].size, p->pc, e->vt);
	if (e->o.faults_cb)
		e->o.faults_cb(e->o.faults_ctx, e, e->t->threads[i].tid, (uint32_t)t->vcpu, p->pc, e->vt);
	e->vt++;
}

/* After a completed step of pushf: the pushed copy of RFLAGS has TF set by
 * our stepping; clear it unless the program had TF set itself. */
static void fix_pushf(pid_t tid, const struct pending *p)
{
	struct user_regs_struct r;
	uint16_t w;
	if (p->rflags_before & 0x100 || gb_regs_get(tid, &r))
		return;
	if (gb_mem_read(tid, r.rsp, &w, 2) == 2 && (w & 0x100)) {
		w &= (uint16_t)~0x100;
		gb_mem_write(tid, r.rsp, &w, 2);
	}
}

/* Run the cpuid at p->pc to an int3 planted after it. */
static int run_over_cpuid(pid_t tid, const struct pending *p, struct gb_stop *st)
{
	uint64_t bp = p->pc + p->insn->len;
	uint8_t orig, cc = 0xcc;
	if (gb_mem_read(tid, bp, &orig, 1) != 1 || gb_mem_write(tid, bp, &cc, 1) != 1)
		return -EFAULT;
	ptrace(PTRACE_CONT, tid, 0, 0);
	int r = gb_wait(tid, 0, st, false);
	gb_mem_write(tid, bp, &orig, 1);
	if (r)
		return r;
	if (st->kind == GB_STOP_SIGNAL && st->sig == SIGTRAP) {
		struct user_regs_struct regs;
		if (gb_regs_get(tid, &regs) == 0 && regs.rip == bp + 1) {
			regs.rip = bp;
			gb_regs_set(tid, &regs);
			st->kind = GB_STOP_STEP;
		}
	}
	return 0;
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

/* Wait for the end of the step of tid, following events on the way (and
 * resuming after them with req: PTRACE_SINGLESTEP, or PTRACE_SYSCALL for a
 * run to the syscall-entry stop). */
static int finish_step(struct gb_engine *e, size_t i, struct gb_stop *st, int req)
{
	pid_t tid = e->t->threads[i].tid;
	bool interrupted = false;
	for (;;) {
		int r = gb_wait(tid, 0, st, !interrupted);
		if (r == -EINTR) {
			/* Ctrl-C while a syscall blocks: stop the thread now. */
			ptrace(PTRACE_INTERRUPT, tid, 0, 0);
			interrupted = true;
			continue;
		}
		if (r) {
			gb_err("trace: waiting for thread %d: %s", tid, strerror(-r));
			eng_finish(e, GB_END_ERROR);
			return r;
		}
		if (st->kind == GB_STOP_EVENT) {
			if (st->event == PTRACE_EVENT_CLONE || st->event == PTRACE_EVENT_FORK ||
			    st->event == PTRACE_EVENT_VFORK)
				eng_new_task(e, (pid_t)st->msg, st->event);
			else if (st->event == PTRACE_EVENT_VFORK_DONE)
				e->vfork_window = false;
			else if (st->event == PTRACE_EVENT_EXEC)
				eng_on_exec(e, i);
			ptrace(req, tid, 0, 0);
			continue;
		}
		if (st->kind == GB_STOP_INTERRUPT && !interrupted) {
			ptrace(req, tid, 0, 0);
			continue;
		}
		return 0;
	}
}

/* The owner is about to make a syscall that may block: the range is given
 * up for the others meanwhile.  Under the page trap the syscall instruction
 * itself sits on the pages, so it is run to its syscall-entry stop first
 * (fetched, now in the kernel), then the pages are re-protected through
 * another, held thread.  false when the thread did not get there. */
static bool give_up_range(struct gb_engine *e, size_t i)
{
	pid_t tid = e->t->threads[i].tid;
	e->owner = -1;
	e->et[i].last_in_range = false;
	e->et[i].out_steps = 0;
	if (!e->trap)
		return true;
	struct gb_stop st;
	if (ptrace(PTRACE_SYSCALL, tid, 0, 0) || finish_step(e, i, &st, PTRACE_SYSCALL))
		return false;
	/* Our entry fault, queued before it stopped: dropped, and once more. */
	if (st.kind == GB_STOP_SIGNAL && stale_entry_fault(e, i, &st, st.fault_addr) &&
	    (ptrace(PTRACE_SYSCALL, tid, 0, 0) || finish_step(e, i, &st, PTRACE_SYSCALL)))
		return false;
	if (st.kind != GB_STOP_SYSCALL) {
		/* A signal came first (nothing executed) or the thread died. */
		if (st.kind == GB_STOP_SIGNAL)
			e->t->threads[i].pending_sig = st.sig;
		else if (st.kind == GB_STOP_EXITED || st.kind == GB_STOP_KILLED)
			eng_on_exit(e, i, &st);
		e->owner = e->et[i].state == T_STOPPED ? (ssize_t)i : -1;
		return false;
	}
	/* The loop re-protects the pages through a held thread before it lets
	 * anyone run natively (threads stepping through syscalls stop on their
	 * way out and cannot slip through). */
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

void eng_step(struct gb_engine *e, size_t i)
{
	struct gb_thread *th = &e->t->threads[i];
	pid_t tid = th->tid;
	struct user_regs_struct regs;
	struct pending p;

	if (gb_regs_get(tid, &regs)) {
		/* Killed under us: its exit status comes through waitpid. */
		eng_set_state(e, i, T_SYSCALL);
		return;
	}
	p.pc = regs.rip;
	if (gb_regs_restarting_syscall(&regs))
		p.pc -= 2; /* the kernel rewinds to the syscall instruction on resume */
	p.in_range = in_range(e, p.pc);
	p.rflags_before = regs.eflags;

	/* Ownership of the range: one thread inside at a time.  The owner gives
	 * it up when it leaves the pages, and also, when other threads live,
	 * when it steps out of the range itself while still on the pages (code
	 * sharing a page with the range), or after GB_OWNER_OUT_BUDGET such
	 * steps: re-protected, it faults again at once and queues behind the
	 * threads already waiting, so a thread looping on the range's page
	 * cannot starve the others.  Every turn steps at least one instruction. */
	bool inside = eng_inside(e, p.pc);
	struct ethread *et = &e->et[i];
	if (e->owner == (ssize_t)i && inside && e->trap && !p.in_range && eng_live(e) > 1 &&
	    (et->last_in_range || et->out_steps >= GB_OWNER_OUT_BUDGET))
		inside = false;
	et->last_in_range = p.in_range;
	et->out_steps = p.in_range ? 0 : et->out_steps + 1;
	if (e->owner == (ssize_t)i && !inside) {
		et->last_in_range = false;
		et->out_steps = 0;
		e->owner = -1;
		if (e->trap) {
			/* Left the pages: run natively again, on its own CPUs (the
			 * scheduler re-protects the pages before anyone runs). */
			if (eng_live(e) > 1)
				gb_tracee_pin_thread(e->t, tid, false);
			return;
		}
	} else if (e->owner < 0 && inside && !e->trap) {
		e->owner = (ssize_t)i;
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
		/* Asynchronous: it may block (until another thread acts, or for
		 * ever), and the loop must still see Ctrl-C and --duration.  Other
		 * threads may use the range meanwhile. */
		if (e->owner == (ssize_t)i && eng_live(e) > 1 && !give_up_range(e, i))
			return;
		commit(e, i, &p);
		gb_icache__bump(e->ic);
		eng_set_state(e, i, T_SYSCALL);
		ptrace(PTRACE_SINGLESTEP, tid, 0, 0);
		return;
	}
	if (!sig && (fl & GB_INSN_CPUID)) {
		if (run_over_cpuid(tid, &p, &st))
			return;
	} else {
		ptrace(PTRACE_SINGLESTEP, tid, 0, sig);
		if (finish_step(e, i, &st, PTRACE_SINGLESTEP))
			return;
	}

	switch (st.kind) {
	case GB_STOP_STEP:
		/* With a signal the step only delivered it (no instruction ran). */
		e->et[i].stale_pc = 0;
		if (!sig) {
			commit(e, i, &p);
			if (fl & GB_INSN_PUSHF)
				fix_pushf(tid, &p);
		}
		break;
	case GB_STOP_SIGNAL:
		if (stale_entry_fault(e, i, &st, p.pc))
			break; /* our own trap's fault, queued before it stopped */
		if (eng_claim_watch(e, tid, st.sig))
			break; /* it changed the range's pages: applied */
		th->pending_sig = st.sig;
		gb_info("trace: thread %d: signal %d (code %d, addr 0x%llx) at pc 0x%llx while stepping",
			tid, st.sig, st.code, (unsigned long long)st.fault_addr, (unsigned long long)p.pc);
		break;
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
