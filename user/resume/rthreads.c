/* The snapshot's threads in the new process (docs/resume.md, "Threads").
 *
 * The order is CRIU's restorer's (criu/pie/restorer.c: __export_restore_task
 * creates the threads with clone once memory is in place; each runs
 * restore_thread_common, set_tid_address and set_robust_list, then rseq, and
 * the registers, sigmask and alternate stack come last, from its sigreturn
 * frame): here every call is injected into the thread it is for, and the
 * registers are set with ptrace, last.
 *
 * Threads 1.. are made by an injected clone(CLONE_VM | CLONE_FS |
 * CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |
 * CLONE_CHILD_CLEARTID) in the helper's thread (thread 0): under
 * PTRACE_O_TRACECLONE each starts in a ptrace-stop before its first
 * instruction, and never runs the helper's code.
 */
#include <errno.h>
#include <inttypes.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <time.h>

#include "common/log.h"
#include "decode/xsave.h"
#include "ptrace/inject.h"
#include "ptrace/mem.h"
#include "ptrace/regs.h"
#include "resume/resume_int.h"

#define THREAD_FLAGS (CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM)

/* clone3's arguments (linux/sched.h's struct clone_args, v2). */
struct clone3_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
	uint64_t set_tid, set_tid_size, cgroup;
};

/* A new thread of the helper, stopped, in *t; its tid (gebpf's), or
 * -errno.  With --new-pidns (c->ns) made by clone3 with the snapshot's
 * tid as set_tid (the scratch area holds its arguments). */
static long clone_thread(struct gb_rctx *c, struct gb_tracee *t, const struct gb_snap_thread *th)
{
	bool ctid = th->ks.have & GB_TS_TID_ADDR && th->ks.clear_tid;
	uint64_t flags = THREAD_FLAGS | (ctid ? CLONE_CHILD_CLEARTID : 0);
	uint64_t args[6] = { flags, 0, 0, ctid ? th->ks.clear_tid : 0, 0, 0 };
	long nr = SYS_clone;
	if (c->ns) {
		struct {
			struct clone3_args a;
			int32_t tid;
		} ca = { { .flags = flags, .child_tid = ctid ? th->ks.clear_tid : 0 }, th->tid };
		uint64_t at = gb_rput(c, 0, &ca, sizeof(ca));
		if (!at)
			return -EFAULT;
		ca.a.set_tid = at + offsetof(__typeof__(ca), tid);
		ca.a.set_tid_size = 1;
		if (!gb_rput(c, 0, &ca, sizeof(ca)))
			return -EFAULT;
		args[0] = at;
		args[1] = sizeof(ca.a);
		args[2] = args[3] = 0;
		nr = SYS_clone3;
	}
	long ret = 0;
	int pending = 0;
	unsigned long msg = 0;
	int e = gb_inject_syscall_ev(c->pid, c->insn, nr, args, &ret, &pending, &msg);
	if (e || ret < 0)
		return e ? e : ret;
	pid_t tid = msg ? (pid_t)msg : (pid_t)ret;
	gb_tracee_adopt(t, tid);
	struct gb_thread *nt = gb_tracee_thread(t, tid);
	if (!nt || !nt->stopped)
		return -ESRCH;
	nt->pending_sig = 0; /* its first stop's, not the program's */
	return tid;
}

/* The thread's kernel state, each call made by the thread itself. */
static int thread_state(struct gb_rctx *c, pid_t tid, const struct gb_snap_thread *th, bool first)
{
	const struct gb_snap_tstate *ks = &th->ks;
	long r;
	if (first && (ks->have & GB_TS_TID_ADDR))
		gb_rsys_in(c, tid, SYS_set_tid_address, ks->clear_tid, 0, 0, 0, 0, 0);
	if ((ks->have & GB_TS_ROBUST) && ks->robust_head &&
	    (r = gb_rsys_in(c, tid, SYS_set_robust_list, ks->robust_head, ks->robust_len, 0, 0, 0, 0)) < 0)
		return gb_resume__fail(c, (int)r, "thread %d: set_robust_list: %s", th->tid,
				       strerror((int)-r));
	if ((ks->have & GB_TS_ALTSTACK) && !(ks->ss_flags & SS_DISABLE)) {
		stack_t ss = { .ss_sp = (void *)(uintptr_t)ks->ss_sp, .ss_size = ks->ss_size, .ss_flags = 0 };
		uint64_t a = gb_rput(c, 0, &ss, sizeof(ss));
		r = a ? gb_rsys_in(c, tid, SYS_sigaltstack, a, 0, 0, 0, 0, 0) : -EFAULT;
		if (r < 0)
			gb_warn("resume: thread %d: sigaltstack 0x%" PRIx64 ": %s", th->tid, ks->ss_sp,
				strerror((int)-r));
	}
	if (ks->have & GB_TS_NAME) {
		char name[16] = { 0 };
		memcpy(name, ks->name, sizeof(name) - 1);
		uint64_t a = gb_rput(c, 0, name, sizeof(name));
		if (a)
			gb_rsys_in(c, tid, SYS_prctl, PR_SET_NAME, a, 0, 0, 0, 0);
	}
	if ((ks->have & GB_TS_RSEQ) && ks->rseq_addr) {
		/* Registering runs the kernel's rseq fix-up on the way back to
		 * the (injection's) user code, which clears rseq_cs: put the
		 * snapshot's back, so a thread caught in a critical section
		 * still aborts it. */
		r = gb_rsys_in(c, tid, SYS_rseq, ks->rseq_addr, ks->rseq_len, 0, ks->rseq_sig, 0, 0);
		uint64_t cs;
		if (r < 0)
			gb_warn("resume: thread %d: rseq 0x%" PRIx64 ": %s (its area keeps the captured "
				"CPU number)", th->tid, ks->rseq_addr, strerror((int)-r));
		else if (!gb_snapshot_read_memory(c->snap, ks->rseq_addr + 8, &cs, sizeof(cs), NULL))
			gb_mem_write(c->pid, ks->rseq_addr + 8, &cs, sizeof(cs));
	}
	/* glibc keeps the thread's tid in its struct pthread, the word
	 * clear_child_tid points at (pthread_kill, mutex owners read it):
	 * the new tid replaces the old one there. */
	if ((ks->have & GB_TS_TID_ADDR) && ks->clear_tid && !c->ns) { /* (ns: its tid kept) */
		int32_t v;
		if (gb_mem_read(c->pid, ks->clear_tid, &v, sizeof(v)) == sizeof(v) && v == th->tid) {
			v = tid;
			gb_mem_write(c->pid, ks->clear_tid, &v, sizeof(v));
		}
	}
	return 0;
}

int gb_resume__threads(struct gb_rctx *c, struct gb_tracee *t, const struct gb_snapshot *s)
{
	/* Every signal blocked from here to the registers (the threads inherit
	 * it): a timer's or a queued signal stays pending for the program
	 * instead of stopping an injection (CRIU's threads block all too). */
	uint64_t all = ~0ull;
	if (ptrace(PTRACE_SETSIGMASK, c->pid, sizeof(all), &all))
		return gb_resume__fail(c, -errno, "block signals: %s", strerror(errno));
	int e = thread_state(c, c->pid, &s->threads[0], true);
	for (size_t i = 1; i < s->nthreads && !e; i++) {
		long tid = clone_thread(c, t, &s->threads[i]);
		if (tid < 0)
			return gb_resume__fail(c, (int)tid, "thread %d: clone: %s", s->threads[i].tid,
					       strerror((int)-tid));
		e = thread_state(c, (pid_t)tid, &s->threads[i], false);
	}
	return e;
}

/* The process's pid as the process itself sees it. */
static pid_t own_pid(const struct gb_rctx *c)
{
	return c->ns ? c->snap->meta.pid : c->pid;
}

/* Queue siginfo info again: for thread tid, by that thread (the kernel lets
 * a thread queue a kill()/tgkill()-shaped siginfo only to itself), or for
 * the process (tid 0), by thread 0, the leader. */
static int requeue(struct gb_rctx *c, pid_t tid, pid_t own_tid, const uint8_t info[128])
{
	siginfo_t si;
	memcpy(&si, info, sizeof(si));
	uint64_t a = gb_rput(c, 0, &si, sizeof(si));
	long r = !a ? -EFAULT
	       : tid ? gb_rsys_in(c, tid, SYS_rt_tgsigqueueinfo, (uint64_t)own_pid(c), (uint64_t)own_tid,
				  (uint64_t)si.si_signo, a, 0, 0)
		     : gb_rsys(c, SYS_rt_sigqueueinfo, (uint64_t)own_pid(c), (uint64_t)si.si_signo, a, 0, 0, 0);
	if (r < 0)
		return gb_resume__fail(c, (int)r, "queue SIG%s again: %s", sigabbrev_np(si.si_signo) ?: "?",
				       strerror((int)-r));
	return 0;
}

int gb_resume__pending(struct gb_rctx *c, const struct gb_tracee *t, const struct gb_snapshot *s)
{
	int e = 0;
	for (size_t i = 0; i < s->nthreads && i < t->nthreads && !e; i++) {
		const struct gb_snap_thread *th = &s->threads[i];
		/* The signal it was stopped delivering, then its queue. */
		pid_t own = c->ns ? th->tid : t->threads[i].tid; /* (the id it has there) */
		if (th->cursig > 0 && th->cursig <= 64)
			e = requeue(c, t->threads[i].tid, own, th->siginfo);
		for (uint32_t k = 0; (th->ks.have & GB_TS_PENDING) && k < th->ks.pending.n && !e; k++)
			e = requeue(c, t->threads[i].tid, own, th->ks.pending.info[k]);
	}
	for (uint32_t k = 0; (s->pk.have & GB_PS_PENDING) && k < s->pk.pending.n && !e; k++)
		e = requeue(c, 0, 0, s->pk.pending.info[k]);
	return e;
}

/* The snapshot's x87/SSE/AVX/AVX-512 state, converted from the standard
 * layout it is stored in to this machine's (decode/xsave.h) and written with
 * the kernel's own regset size.  Components this CPU lacks are said, once. */
static int set_vector_state(pid_t tid, const struct gb_snap_thread *th, bool *warned)
{
	if (!th->xstate)
		return gb_fpregs_set(tid, &th->fpregs);
	uint8_t *area = NULL;
	size_t cap = 0, len;
	int e = gb_xstate_read(tid, &area, &cap, &len);
	uint64_t lost = 0;
	if (!e && gb_xsave_from_standard(th->xstate, th->xstate_len, area, len, &lost) == 0) {
		e = gb_xstate_set(tid, area, len);
		if (!e && lost && !*warned)
			gb_warn("resume: the snapshot holds XSAVE components 0x%" PRIx64
				" that this CPU does not enable: they start in their initial state",
				lost);
		*warned |= lost != 0;
	} else {
		if (!e && !*warned)
			gb_warn("resume: the snapshot's XSAVE area (%zu bytes) is not an XSAVE "
				"area: restoring x87/SSE state only", th->xstate_len);
		*warned = true;
		e = gb_fpregs_set(tid, &th->fpregs);
	}
	free(area);
	return e;
}

/* A thread stopped in a system call the kernel would restart is put back
 * on its syscall instruction with the call's number, as the kernel does
 * after a signal without handler.  -ERESTART_RESTARTBLOCK's restart block
 * is the old kernel's: for a relative nanosleep / clock_nanosleep the time
 * left, which that kernel wrote to the call's rem argument when the thread
 * stopped, becomes the request (the kernel's hrtimer_nanosleep_restart
 * sleeps exactly that); other calls are made again with their own
 * arguments (a futex or poll timeout starts again; restart_syscall itself
 * returns EINTR, as it would in any new thread). */
static void restart_regs(struct user_regs_struct *r)
{
	if (!gb_regs_restarting_syscall(r))
		return;
	bool block = (long)r->rax == -516; /* -ERESTART_RESTARTBLOCK */
	r->rax = r->orig_rax;
	r->rip -= 2;
	if (!block)
		return;
	if (r->orig_rax == SYS_nanosleep && r->rsi)
		r->rdi = r->rsi;
	else if (r->orig_rax == SYS_clock_nanosleep && !(r->rsi & TIMER_ABSTIME) && r->r10)
		r->rdx = r->r10;
}

static int set_cpu(struct gb_rctx *c, pid_t tid, const struct gb_snap_thread *th, bool *warned)
{
	struct user_regs_struct r = th->regs;
	restart_regs(&r);
	r.orig_rax = (unsigned long long)-1;
	int e = gb_regs_set(tid, &r);
	if (e)
		return gb_resume__fail(c, e, "thread %d: set the registers: %s", th->tid, strerror(-e));
	e = set_vector_state(tid, th, warned);
	if (e)
		return gb_resume__fail(c, e, "thread %d: set the FPU/vector registers: %s", th->tid,
				       strerror(-e));
	uint64_t mask = th->sighold;
	if (ptrace(PTRACE_SETSIGMASK, tid, sizeof(mask), &mask))
		return gb_resume__fail(c, -errno, "thread %d: set the signal mask: %s", th->tid,
				       strerror(errno));
	return 0;
}

int gb_resume__cpus(struct gb_rctx *c, const struct gb_tracee *t, const struct gb_snapshot *s)
{
	bool warned = false;
	int e = 0;
	/* t's threads are the snapshot's in order: the helper's, then each clone. */
	for (size_t i = 0; i < s->nthreads && i < t->nthreads && !e; i++)
		e = set_cpu(c, t->threads[i].tid, &s->threads[i], &warned);
	return e;
}
