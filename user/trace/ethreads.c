/* The dispatcher of the stops of threads that are not being stepped: those
 * running on their own (natively between entries, or blocked in a
 * syscall), and the owner in translated code (handed to its runner,
 * ejit.c); and the thread and process events of the engine: threads
 * appearing and exiting, fork children let go, exec.  Holding and stopping
 * the world, which wait for such stops, are here too. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>

#include "common/grow.h"
#include "common/clock.h"
#include "common/log.h"
#include "ptrace/procfs.h"
#include "ptrace/regs.h"
#include "ptrace/tracee.h"
#include "trace/engine_int.h"
#include "trace/xol.h"

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
	eng_thread_reset(e, i); /* (a tid reused: a new thread all the same) */
	eng_set_state(e, i, T_STOPPED);
	if (!trap_native(e))
		gb_tracee_pin_thread(e->t, tid, true); /* every thread is stepped */
}

/* A child process, stopped at its first stop: let it go untraced (with
 * nothing of the trap left in it: the trap's child hook). */
static void let_go_child(struct gb_engine *e, pid_t child, bool vfork)
{
	gb_info("trace: %s child %d let go", vfork ? "vfork" : "forked", child);
	TRAP_CALL(e, child, child, vfork);
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

static void on_exec(struct gb_engine *e, size_t i)
{
	/* Every other thread is gone; the exec'ing thread now has tid == pid. */
	for (size_t k = 0; k < e->t->nthreads; k++)
		if (k != i)
			eng_set_state(e, k, T_GONE);
	e->exec_from = e->t->threads[i].tid;
	e->xol_due = true;
	e->t->threads[i].tid = e->t->pid;
	eng_set_owner(e, -1);
	gb_icache__clear(e->ic);
	e->image_gen++; /* the code cache went with the old image */
	TRAP_CALL0(e, exec); /* the range in the new image */
	eng_range_follow(e);
}

/* Where a stopped thread is: inside (the range, or the trapped pages) it
 * must own the range first. */
static void stopped_at(struct gb_engine *e, size_t i)
{
	struct user_regs_struct r;
	eng_set_state(e, i, T_STOPPED);
	if (trap_native(e) && gb_regs_get(eng_tid(e, i), &r) == 0 && eng_inside(e, r.rip))
		eng_th(e, i)->want_entry = true;
}

/* Thread i at a syscall's exit, before its next instruction: after an exec,
 * the new image gets the kernel's uprobe page now, as at launch
 * (session.c), so that its later mappings are placed the same under every
 * trap, whichever engine ran the exec. */
static void exec_exit(struct gb_engine *e, size_t i)
{
	if (!e->xol_due)
		return;
	e->xol_due = false;
	gb_xol_reserve(e->t->pid, eng_tid(e, i));
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
	bool interrupted;
	eng_set_state(e, i, T_STOPPED);
	if (ptrace(PTRACE_SYSCALL, tid, 0, 0) || gb_wait_resumed(tid, &st, &interrupted))
		return;
	if (st.kind == GB_STOP_EXITED || st.kind == GB_STOP_KILLED)
		eng_on_exit(e, i, &st);
	else if (st.kind == GB_STOP_SIGNAL)
		eng_keep_signal(e, i, st.sig);
	else if (st.kind == GB_STOP_SYSCALL)
		exec_exit(e, i);
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
		if (TRAP_OPS(e)->vfork_done)
			TRAP_OPS(e)->vfork_done(e->trap);
		break;
	case PTRACE_EVENT_EXEC:
		on_exec(e, i);
		break;
	}
}

/* How a running thread goes on after a stop on its way (an event, a
 * syscall-entry stop): as it was going. */
static void carry_on(struct gb_engine *e, size_t i)
{
	enum tstate s = eng_state(e, i);
	eng_resume(e, i, s == T_NATIVE ? PTRACE_CONT : PTRACE_SYSCALL, 0, s);
}

/* A signal stop of thread i running on its own. */
static void on_signal(struct gb_engine *e, size_t i, const struct gb_stop *st)
{
	enum gb_trap_verdict v = trap_classify(e, i, st, GB_AT_NATIVE, 0);
	eng_set_state(e, i, T_STOPPED);
	switch (v) {
	case GB_TRAP_WATCH:
		/* The program changed the range's protections itself. */
		gb_icache__bump(e->ic);
		return;
	case GB_TRAP_ENTRY:
		/* Stopped at an entry: never delivered. */
		eng_th(e, i)->want_entry = true;
		eng_range_follow(e);
		return;
	case GB_TRAP_SWALLOW:
	case GB_TRAP_STEP:
		return;
	case GB_TRAP_PROGRAM:
		break;
	}
	eng_range_follow(e); /* (a hit taken early) */
	eng_keep_signal(e, i, st->sig);
	gb_info("trace: thread %d: signal %d (code %d, addr 0x%llx) for the program", st->tid,
		st->sig, st->code, (unsigned long long)st->fault_addr);
}

/* An exec made by a thread other than the leader is reported under the
 * leader's tid, which the exec'ing thread takes over (the event's message
 * is its former tid): it is that thread's stop (it goes on, with its vcpu),
 * not the leader's, whom the kernel killed. */
static ssize_t exec_slot(struct gb_engine *e, ssize_t k, const struct gb_stop *st)
{
	if (st->kind != GB_STOP_EVENT || st->event != PTRACE_EVENT_EXEC || (pid_t)st->msg == st->tid)
		return k;
	ssize_t was = eng_index(e, (pid_t)st->msg);
	return was >= 0 ? was : k;
}

void eng_dispatch(struct gb_engine *e, const struct gb_stop *st)
{
	ssize_t k = exec_slot(e, eng_index(e, st->tid), st);
	if (k < 0) {
		if (st->kind != GB_STOP_EXITED && st->kind != GB_STOP_KILLED && !was_detached(e, st->tid))
			adopt(e, st->tid);
		return;
	}
	size_t i = (size_t)k;
	if (eng_state(e, i) == T_JIT) {
		eng_jit_stop(e, i, st); /* the translating runner's */
		return;
	}
	bool native = eng_state(e, i) == T_NATIVE;
	if (st->kind != GB_STOP_EXITED && st->kind != GB_STOP_KILLED && TRAP_OPS(e)->settle)
		TRAP_OPS(e)->settle(e->trap, st->tid);
	if (eng_state(e, i) == T_HANDLER) {
		eng_handler_stop(e, i, st); /* the owner in its handler, natively */
		return;
	}
	switch (st->kind) {
	case GB_STOP_EXITED:
	case GB_STOP_KILLED:
		eng_on_exit(e, i, st);
		return;
	case GB_STOP_STEP:
	case GB_STOP_INTERRUPT:
		if (st->kind == GB_STOP_INTERRUPT)
			e->t->threads[i].group_stop = false; /* (SIGTRAP: its process runs) */
		gb_icache__bump(e->ic); /* a syscall or native code may have written code */
		stopped_at(e, i);
		return;
	case GB_STOP_SIGNAL:
		on_signal(e, i, st);
		return;
	case GB_STOP_GROUP:
		if (eng_state(e, i) == T_GROUP) {
			/* Listening, it was interrupted (the end, a world
			 * stopped): held, where it can be worked on; it listens
			 * again when it would run (eng_park). */
			e->t->threads[i].group_stop = true;
			eng_set_state(e, i, T_STOPPED);
			return;
		}
		eng_listen(e, i);
		return;
	case GB_STOP_EVENT:
		eng_event(e, i, st);
		if (native && (st->event == PTRACE_EVENT_VFORK_DONE || st->event == PTRACE_EVENT_EXEC)) {
			/* Stopped until the scheduler re-arms the trap (a new
			 * image: until its pages are trapped). */
			finish_syscall_stopped(e, i);
			return;
		}
		if (eng_state(e, i) == T_NATIVE || eng_state(e, i) == T_SYSCALL)
			carry_on(e, i);
		return;
	case GB_STOP_SYSCALL:
		if (eng_state(e, i) == T_SYSCALL && st->sys_exit) {
			/* The syscall is done: the thread is before its next
			 * instruction, as after a step. */
			gb_icache__bump(e->ic);
			exec_exit(e, i);
			TRAP_CALL(e, syscall_exit, i);
			stopped_at(e, i);
			return;
		}
		carry_on(e, i);
		return;
	}
}

void eng_poll(struct gb_engine *e, bool block, int timeout_ms)
{
	struct gb_stop st;
	bool got = false, slept = false;
	for (;;) {
		int r = gb_wait(-1, WNOHANG, &st, true);
		if (r == 0) {
			eng_dispatch(e, &st);
			got = true;
			continue;
		}
		if (r != -EAGAIN || got || !block || slept)
			return;
		/* --duration ends on time, not at the next tick. */
		double left = e->o.duration > 0 ? e->o.duration - (gb_mono_s() - e->t0) : 1e9;
		if (left * 1e3 < timeout_ms)
			timeout_ms = left > 0 ? (int)(left * 1e3) + 1 : 0;
		/* SIGCHLD is blocked while the engine runs, so sigtimedwait
		 * cannot miss one. */
		sigset_t chld;
		sigemptyset(&chld);
		sigaddset(&chld, SIGCHLD);
		struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
		sigtimedwait(&chld, NULL, &ts);
		slept = true;
	}
}

bool eng_wait_one(struct gb_engine *e, pid_t tid)
{
	struct gb_stop st;
	if (gb_wait(tid, 0, &st, false))
		return false;
	eng_dispatch(e, &st);
	return true;
}

void eng_hold_all(struct gb_engine *e)
{
	for (size_t i = 0; i < e->t->nthreads; i++)
		if (eng_state(e, i) == T_NATIVE || eng_state(e, i) == T_HANDLER)
			ptrace(PTRACE_INTERRUPT, eng_tid(e, i), 0, 0);
	/* Wait until none runs natively.  Events on the way are handled; a
	 * thread resumed after an event (clone, exec) still has the interrupt
	 * pending and stops right after. */
	for (;;) {
		bool running = false;
		for (size_t i = 0; i < e->t->nthreads; i++)
			running |= eng_state(e, i) == T_NATIVE || eng_state(e, i) == T_HANDLER;
		if (!running || !eng_wait_one(e, -1))
			return;
	}
}

void eng_interrupt(struct gb_engine *e, size_t i)
{
	if (ptrace(PTRACE_INTERRUPT, eng_tid(e, i), 0, 0) == 0)
		eng_wait_one(e, eng_tid(e, i));
}

bool eng_stop_in_syscall(struct gb_engine *e, size_t i)
{
	pid_t tid = eng_tid(e, i);
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0))
		return false;
	for (int n = 0; n < 64 && eng_state(e, i) == T_SYSCALL; n++)
		if (!eng_wait_one(e, tid))
			break;
	return eng_state(e, i) == T_STOPPED;
}

void eng_stop_world(struct gb_engine *e, enum tstate *was)
{
	eng_hold_all(e);
	for (size_t i = 0; i < e->t->nthreads; i++) {
		was[i] = eng_state(e, i);
		if (was[i] != T_SYSCALL && was[i] != T_GROUP)
			continue;
		eng_interrupt(e, i);
		/* Resumed by an event on the way (clone...): once more. */
		if (eng_state(e, i) != T_STOPPED && eng_state(e, i) != T_GONE)
			eng_interrupt(e, i);
	}
}

void eng_resume_world(struct gb_engine *e, const enum tstate *was)
{
	for (size_t i = 0; i < e->t->nthreads; i++) {
		if (eng_state(e, i) != T_STOPPED)
			continue;
		struct user_regs_struct r;
		if (was[i] == T_GROUP) {
			eng_park(e, i); /* (or it runs: a SIGCONT came meanwhile) */
		} else if (was[i] == T_SYSCALL && gb_regs_get(eng_tid(e, i), &r) == 0 &&
			   gb_regs_restarting_syscall(&r)) {
			/* Interrupted inside its syscall (already traced when it was
			 * issued): let it go on as it was. */
			eng_resume(e, i, PTRACE_SYSCALL, 0, T_SYSCALL);
		}
	}
}
