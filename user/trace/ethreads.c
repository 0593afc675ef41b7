/* Thread and process events of the engine: threads appearing and exiting,
 * fork children let go, exec, and events of threads running on their own
 * (natively under the page trap, or blocked in a syscall). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>

#include "common/grow.h"
#include "common/log.h"
#include "common/waitstatus.h"
#include "ptrace/procfs.h"
#include "ptrace/regs.h"
#include "trace/engine_int.h"

/* A new task is a thread of ours when its thread group is our process
 * (/proc/TID/status Tgid; /proc/PID/task/TID may not list it yet). */
static bool is_thread_of(pid_t pid, pid_t tid)
{
	uint64_t tgid;
	return gb_proc_status_num(tid, "Tgid", 10, &tgid) == 0 && tgid == (uint64_t)pid;
}

static bool was_detached(struct gb_engine *e, pid_t pid)
{
	for (size_t i = 0; i < e->ndetached; i++)
		if (e->detached[i] == pid)
			return true;
	return false;
}

static void remember_detached(struct gb_engine *e, pid_t pid)
{
	if (GB_GROW(&e->detached, &e->detached_cap, e->ndetached + 1)) {
		eng_finish(e, GB_END_ERROR);
		return;
	}
	e->detached[e->ndetached++] = pid;
}

static bool is_pending_kid(struct gb_engine *e, pid_t pid, bool take)
{
	for (size_t i = 0; i < e->npending_kids; i++)
		if (e->pending_kids[i] == pid) {
			if (take)
				e->pending_kids[i] = e->pending_kids[--e->npending_kids];
			return true;
		}
	return false;
}

static void add_thread(struct gb_engine *e, pid_t tid)
{
	struct gb_thread *th = gb_tracee_add_thread(e->t, tid);
	if (!th)
		return;
	size_t i = (size_t)(th - e->t->threads);
	gb_info("trace: new thread %d", tid);
	eng_thread(e, i)->vcpu = -1;
	eng_set_state(e, i, T_STOPPED);
	if (!eng_trapped(e))
		gb_tracee_pin_thread(e->t, tid, true); /* every thread is stepped */
}

/* A child process, stopped at its first stop: let it go untraced.  A forked
 * child has a copy of our page protections (and trampoline page): it gets
 * the program's back.  A vfork child shares our memory: the trap is lifted
 * for both, through the child (the parent is inside vfork until the child
 * execs or exits), until PTRACE_EVENT_VFORK_DONE. */
static void let_go_child(struct gb_engine *e, pid_t child, bool vfork)
{
	gb_info("trace: %s child %d let go", vfork ? "vfork" : "forked", child);
	if (e->trap && vfork) {
		int sig = 0;
		if (gb_pagetrap__touched(e->trap))
			gb_pagetrap__disarm(e->trap, child, &sig);
		e->vfork_window = true;
		if (sig)
			kill(child, sig);
	} else if (e->trap) {
		gb_pagetrap__fix_child(e->trap, child);
	}
	ptrace(PTRACE_DETACH, child, 0, 0);
	remember_detached(e, child);
}

static void adopt(struct gb_engine *e, pid_t tid)
{
	if (is_thread_of(e->t->pid, tid))
		add_thread(e, tid);
	else if (!is_pending_kid(e, tid, false)) {
		/* A child whose first stop came before its parent's event: the
		 * event says fork or vfork; wait for it. */
		if (GB_GROW(&e->pending_kids, &e->pending_kids_cap, e->npending_kids + 1)) {
			eng_finish(e, GB_END_ERROR);
			return;
		}
		e->pending_kids[e->npending_kids++] = tid;
	}
}

static void new_task(struct gb_engine *e, pid_t nt, int event)
{
	if (eng_index(e, nt) >= 0 || was_detached(e, nt))
		return; /* a thread whose first stop was seen already */
	if (!is_pending_kid(e, nt, true)) {
		/* Its first stop (it starts in one of its own). */
		struct gb_stop st;
		if (gb_wait(nt, 0, &st, false) || st.kind == GB_STOP_EXITED || st.kind == GB_STOP_KILLED)
			return;
		if (is_thread_of(e->t->pid, nt)) {
			add_thread(e, nt);
			return;
		}
	}
	let_go_child(e, nt, event == PTRACE_EVENT_VFORK);
}

void eng_on_exec(struct gb_engine *e, size_t i)
{
	/* Every other thread is gone; the exec'ing thread now has tid == pid. */
	for (size_t k = 0; k < e->t->nthreads; k++)
		if (k != i)
			eng_set_state(e, k, T_GONE);
	e->t->threads[i].tid = e->t->pid;
	eng_set_owner(e, -1);
	gb_icache__clear(e->ic);
	eng_jit_exec(e);
	if (e->probes) {
		/* The probes stay on the file: the range is known again at the
		 * first hit in the new image (if it maps the file at all). */
		gb_probes__exec(e->probes);
		eng_sync_range(e);
		return;
	}
	uint64_t s = e->o.start, en = e->o.end;
	int r = e->o.rerange_cb ? e->o.rerange_cb(e->o.rerange_ctx, e->t->pid, &s, &en) : -1;
	if (r == 0) {
		e->o.start = s;
		e->o.end = en;
		e->range_pending = false;
	} else if (r == -EAGAIN) {
		/* Its module is not mapped in the new image yet: look again
		 * after each mmap, single-stepping (the page trap needs the
		 * range's pages). */
		e->range_pending = true;
		if (e->trap) {
			gb_warn("pid %d: after exec the range's module is not mapped yet; "
				"single-stepping everything from here (slow; the probe trap follows "
				"it natively)", e->t->pid);
			gb_pagetrap__free(e->trap);
			e->trap = NULL;
		}
		return;
	}
	if (e->trap) {
		/* The old image's protections died with it: trap the range again
		 * in the new one (armed before anything runs natively). */
		gb_pagetrap__free(e->trap);
		e->trap = gb_pagetrap__new(e->t->pid, e->o.start, e->o.end);
		if (!e->trap)
			gb_warn("pid %d: after exec the range is not executable code; single-stepping "
				"everything from here", e->t->pid);
	}
}

void eng_on_exit(struct gb_engine *e, size_t i, const struct gb_stop *st)
{
	gb_info("trace: thread %d %s (%d)", e->t->threads[i].tid, gb_stop_kind_name(st->kind),
		st->kind == GB_STOP_EXITED ? st->code : st->sig);
	if (e->owner == (ssize_t)i)
		eng_set_owner(e, -1);
	if (e->probes)
		gb_probes__forget(e->probes, e->t->threads[i].tid);
	eng_set_state(e, i, T_GONE);
	if (e->t->threads[i].tid == e->t->pid) {
		e->exit_status = gb_wait_status(st->kind == GB_STOP_EXITED, st->code, st->sig);
		e->t->exited = true;
		e->t->exit_status = e->exit_status;
	}
}

/* Thread i stopped after a probe's instruction: it waits for the range. */
static void took_hit(struct gb_engine *e, size_t i, const struct gb_probe_hit *hit)
{
	e->et[i].hit = *hit;
	e->et[i].has_hit = true;
	e->et[i].want_entry = true;
	eng_sync_range(e);
}

/* Where a stopped thread is: inside (the range, or the trapped pages) it
 * must own the range first. */
static void stopped_at(struct gb_engine *e, size_t i)
{
	struct user_regs_struct r;
	eng_set_state(e, i, T_STOPPED);
	if (eng_trapped(e) && gb_regs_get(e->t->threads[i].tid, &r) == 0 && eng_inside(e, r.rip))
		e->et[i].want_entry = true;
}

/* A native thread at an event stop inside a syscall (exec, vfork-done) must
 * be left on an instruction boundary before anything is injected into it:
 * it runs to its syscall-exit stop (its return value written), before the
 * next instruction.  Then it waits, stopped, for the scheduler to arm the
 * trap. */
static void finish_syscall_stopped(struct gb_engine *e, size_t i)
{
	pid_t tid = e->t->threads[i].tid;
	struct gb_stop st;
	eng_set_state(e, i, T_STOPPED);
	if (ptrace(PTRACE_SYSCALL, tid, 0, 0) || gb_wait(tid, 0, &st, false))
		return;
	if (st.kind == GB_STOP_EXITED || st.kind == GB_STOP_KILLED)
		eng_on_exit(e, i, &st);
	else if (st.kind == GB_STOP_SIGNAL)
		e->t->threads[i].pending_sig = st.sig;
}

/* A pending range (--trap none): after an mmap, is its module there? */
static void look_for_range(struct gb_engine *e, size_t i)
{
	struct user_regs_struct r;
	uint64_t s = 0, en = 0;
	if (gb_regs_get(e->t->threads[i].tid, &r) || r.orig_rax != SYS_mmap || !e->o.rerange_cb ||
	    e->o.rerange_cb(e->o.rerange_ctx, e->t->pid, &s, &en))
		return;
	e->o.start = s;
	e->o.end = en;
	e->range_pending = false;
	gb_jsonl__set_range(e->out, true, s, true, en);
}

void eng_event(struct gb_engine *e, size_t i, const struct gb_stop *st)
{
	switch (st->event) {
	case PTRACE_EVENT_CLONE:
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK:
		new_task(e, (pid_t)st->msg, st->event);
		break;
	case PTRACE_EVENT_VFORK_DONE:
		e->vfork_window = false;
		break;
	case PTRACE_EVENT_EXEC:
		eng_on_exec(e, i);
		break;
	}
}

/* How a running thread goes on after a stop on its way (an event, a
 * syscall-entry stop): as it was going. */
static void carry_on(struct gb_engine *e, size_t i)
{
	pid_t tid = e->t->threads[i].tid;
	if (e->et[i].state == T_NATIVE)
		ptrace(PTRACE_CONT, tid, 0, 0);
	else
		ptrace(PTRACE_SYSCALL, tid, 0, 0);
}

void eng_async(struct gb_engine *e, const struct gb_stop *st)
{
	ssize_t i = eng_index(e, st->tid);
	if (i < 0) {
		if (st->kind != GB_STOP_EXITED && st->kind != GB_STOP_KILLED && !was_detached(e, st->tid))
			adopt(e, st->tid);
		return;
	}
	struct gb_thread *th = &e->t->threads[i];
	bool native = e->et[i].state == T_NATIVE;
	struct user_regs_struct r;
	if (e->trap && st->kind != GB_STOP_EXITED && st->kind != GB_STOP_KILLED)
		gb_pagetrap__settle(e->trap, st->tid); /* never seen inside the trampoline */
	switch (st->kind) {
	case GB_STOP_EXITED:
	case GB_STOP_KILLED:
		eng_on_exit(e, (size_t)i, st);
		return;
	case GB_STOP_STEP:
	case GB_STOP_INTERRUPT:
		gb_icache__bump(e->ic); /* a syscall or native code may have written code */
		stopped_at(e, (size_t)i);
		return;
	case GB_STOP_SIGNAL:
		if (eng_claim_watch(e, st->tid, st->sig)) {
			/* The program changed the range's protections itself. */
			eng_set_state(e, (size_t)i, T_STOPPED);
			return;
		}
		if (e->probes) {
			struct gb_probe_hit hit;
			if (gb_probes__claim(e->probes, st, &hit)) {
				/* A probe: the probed instruction ran, the thread
				 * stopped after it.  Never delivered.  (TAKEN: its hit
				 * was taken at an earlier stop.) */
				eng_set_state(e, (size_t)i, T_STOPPED);
				if (!(hit.flags & GB_PROBE_HIT_TAKEN))
					took_hit(e, (size_t)i, &hit);
				return;
			}
			/* The program's own signal, dequeued before a probe's
			 * (lower numbers first): the hit is taken now, so that the
			 * handler runs after its instruction is in the trace. */
			if (!e->et[i].has_hit && gb_probes__take_early(e->probes, st, &hit))
				took_hit(e, (size_t)i, &hit);
		}
		if (e->trap && gb_regs_get(th->tid, &r) == 0 && gb_pagetrap__is_entry(e->trap, st, r.rip)) {
			/* Our trap: the fault is swallowed, the instruction re-runs. */
			eng_set_state(e, (size_t)i, T_STOPPED);
			e->et[i].want_entry = true;
			return;
		}
		eng_set_state(e, (size_t)i, T_STOPPED);
		th->pending_sig = st->sig;
		if (e->probes && st->code > 0 && (st->sig == SIGSEGV || st->sig == SIGBUS ||
		    st->sig == SIGILL || st->sig == SIGFPE) && gb_regs_get(th->tid, &r) == 0) {
			e->et[i].fault_seen = true;
			e->et[i].fault_pc = r.rip;
			e->et[i].fault = *st;
		}
		gb_info("trace: thread %d: signal %d (code %d, addr 0x%llx) for the program", st->tid,
			st->sig, st->code, (unsigned long long)st->fault_addr);
		return;
	case GB_STOP_GROUP:
		eng_set_state(e, (size_t)i, T_GROUP);
		ptrace(PTRACE_LISTEN, st->tid, 0, 0);
		return;
	case GB_STOP_EVENT:
		eng_event(e, (size_t)i, st);
		if (native && (st->event == PTRACE_EVENT_VFORK_DONE || st->event == PTRACE_EVENT_EXEC)) {
			/* Stopped until the scheduler re-arms the trap (a new
			 * image: until its pages are trapped). */
			finish_syscall_stopped(e, (size_t)i);
			return;
		}
		if (e->et[i].state == T_NATIVE || e->et[i].state == T_SYSCALL)
			carry_on(e, (size_t)i);
		return;
	case GB_STOP_SYSCALL:
		if (e->et[i].state == T_SYSCALL && st->sys_exit) {
			/* The syscall is done: the thread is before its next
			 * instruction, as after a step. */
			gb_icache__bump(e->ic);
			if (e->range_pending && !e->probes)
				look_for_range(e, (size_t)i);
			stopped_at(e, (size_t)i);
			return;
		}
		carry_on(e, (size_t)i);
		return;
	}
}

void eng_hold_all(struct gb_engine *e)
{
	for (size_t i = 0; i < e->t->nthreads; i++)
		if (e->et[i].state == T_NATIVE)
			ptrace(PTRACE_INTERRUPT, e->t->threads[i].tid, 0, 0);
	/* Wait until none runs natively.  Events on the way are handled; a
	 * thread resumed after an event (clone, exec) still has the interrupt
	 * pending and stops right after. */
	for (;;) {
		bool running = false;
		for (size_t i = 0; i < e->t->nthreads; i++)
			running |= e->et[i].state == T_NATIVE;
		if (!running)
			return;
		struct gb_stop st;
		if (gb_wait(-1, 0, &st, false))
			return;
		eng_async(e, &st);
	}
}

static ssize_t any_stopped(struct gb_engine *e, ssize_t i)
{
	if (i >= 0 && e->et[i].state == T_STOPPED)
		return i;
	for (size_t k = 0; k < e->t->nthreads; k++)
		if (e->et[k].state == T_STOPPED)
			return (ssize_t)k;
	return -1;
}

int eng_arm(struct gb_engine *e, ssize_t i)
{
	if (!e->trap || gb_pagetrap__armed(e->trap) || e->vfork_window)
		return 0;
	ssize_t k = any_stopped(e, i);
	if (k < 0)
		return -ESRCH;
	int r = gb_pagetrap__arm(e->trap, e->t->threads[k].tid, &e->t->threads[k].pending_sig);
	if (r && r != -ESRCH) {
		gb_err("pid %d: cannot protect the range's pages: %s", e->t->pid, strerror(-r));
		eng_finish(e, GB_END_ERROR);
	}
	return r;
}

int eng_disarm(struct gb_engine *e, ssize_t i)
{
	if (!e->trap || !gb_pagetrap__touched(e->trap))
		return 0;
	ssize_t k = any_stopped(e, i);
	if (k < 0)
		return -ESRCH;
	int r = gb_pagetrap__disarm(e->trap, e->t->threads[k].tid, &e->t->threads[k].pending_sig);
	if (r && r != -ESRCH) {
		gb_err("pid %d: cannot restore the range's page protections: %s", e->t->pid,
		       strerror(-r));
		eng_finish(e, GB_END_ERROR);
	}
	return r;
}

void eng_stop_world(struct gb_engine *e, enum tstate *was)
{
	eng_hold_all(e);
	for (size_t i = 0; i < e->t->nthreads; i++) {
		was[i] = e->et[i].state;
		if (was[i] != T_SYSCALL && was[i] != T_GROUP)
			continue;
		pid_t tid = e->t->threads[i].tid;
		struct gb_stop st;
		if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) || gb_wait(tid, 0, &st, false))
			continue;
		eng_async(e, &st);
		if (e->et[i].state != T_STOPPED && e->et[i].state != T_GONE) {
			/* Resumed by an event on the way (clone...): once more. */
			if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) == 0 && gb_wait(tid, 0, &st, false) == 0)
				eng_async(e, &st);
		}
	}
}

void eng_resume_world(struct gb_engine *e, const enum tstate *was)
{
	for (size_t i = 0; i < e->t->nthreads; i++) {
		if (e->et[i].state != T_STOPPED)
			continue;
		pid_t tid = e->t->threads[i].tid;
		struct user_regs_struct r;
		if (was[i] == T_GROUP) {
			ptrace(PTRACE_LISTEN, tid, 0, 0);
			eng_set_state(e, i, T_GROUP);
		} else if (was[i] == T_SYSCALL && gb_regs_get(tid, &r) == 0 &&
			   gb_regs_restarting_syscall(&r)) {
			/* Interrupted inside its syscall (already traced when it was
			 * issued): let it go on as it was. */
			ptrace(PTRACE_SYSCALL, tid, 0, 0);
			eng_set_state(e, i, T_SYSCALL);
		}
	}
}
