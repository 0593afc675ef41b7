/* The dispatcher of the stops of threads that are not being stepped: those
 * running on their own (natively between entries, or blocked in a
 * syscall), the owner in translated code (handed to its runner, ejit.c)
 * and the owner running a signal handler natively (ehandler.c); their
 * thread and process events go to eevents.c.  Holding and stopping the
 * world, which wait for such stops, are here too. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>

#include "common/clock.h"
#include "common/grow.h"
#include "common/log.h"
#include "common/sigflag.h"
#include "ptrace/procfs.h"
#include "ptrace/regs.h"
#include "ptrace/tracee.h"
#include "trace/engine_int.h"

/* Where a stopped thread is: inside (the range, or the trapped pages) it
 * must own the range first. */
static void stopped_at(struct gb_engine *e, size_t i)
{
	struct user_regs_struct r;
	eng_set_state(e, i, T_STOPPED);
	if (trap_native(e) && gb_regs_get(eng_tid(e, i), &r) == 0 && eng_inside(e, r.rip))
		eng_th(e, i)->want_entry = true;
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
		eng_exec_exit(e, i);
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
		if (st->kind != GB_STOP_EXITED && st->kind != GB_STOP_KILLED && !eng_was_detached(e, st->tid))
			eng_adopt(e, st->tid);
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
			eng_exec_exit(e, i);
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

/* PTRACE_INTERRUPT to thread i unless the last one is still to come: the
 * kernel lets any ptrace-stop take a pending interrupt with it ("the
 * actual trap might not be PTRACE_EVENT_STOP, but the pending condition is
 * cleared regardless": a clone's event stop, a syscall's), so a thread
 * resumed after such a stop runs on unless it is interrupted again. */
static long kick(struct gb_engine *e, size_t i)
{
	struct ethread *t = eng_th(e, i);
	if (t->kicked && t->kicked_at == t->resumes)
		return 0;
	t->kicked = true;
	t->kicked_at = t->resumes;
	return ptrace(PTRACE_INTERRUPT, eng_tid(e, i), 0, 0);
}

/* One report of any thread, dispatched, within ms: 1; 0 when none came;
 * -1 when none can (no tracee left), or a SIGINT/SIGTERM came a second ago
 * (as a blocking wait's grace). */
static int wait_any_for(struct gb_engine *e, int ms, double *flag_seen)
{
	struct gb_stop st;
	int r = gb_wait(-1, WNOHANG, &st, false);
	if (r == -EAGAIN) {
		sigset_t chld, old;
		sigemptyset(&chld);
		sigaddset(&chld, SIGCHLD);
		sigprocmask(SIG_BLOCK, &chld, &old);
		r = gb_wait(-1, WNOHANG, &st, false); /* (one that came before the block) */
		if (r == -EAGAIN) {
			struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
			sigtimedwait(&chld, NULL, &ts);
			r = gb_wait(-1, WNOHANG, &st, false);
		}
		sigprocmask(SIG_SETMASK, &old, NULL);
	}
	if (r == -EAGAIN) {
		if (!gb_sigflag_stop())
			return 0;
		if (*flag_seen < 0)
			*flag_seen = gb_mono_s();
		return gb_mono_s() - *flag_seen < 1.0 ? 0 : -1;
	}
	if (r)
		return -1;
	eng_dispatch(e, &st);
	return 1;
}

/* Wait until none runs natively.  Events on the way are handled; a thread
 * an event resumed (a clone's parent, an exec) is interrupted again.  (Once
 * it was not: the end of a trace of pt_churn, 1 run in some hundreds on CI,
 * left gebpf in waitpid and the program stopped until the test's timeout,
 * 120 s.)  And where nothing comes for a second every thread still running
 * is interrupted again, whatever resumed it. */
void eng_hold_all(struct gb_engine *e)
{
	double flag_seen = -1;
	for (size_t i = 0; i < e->t->nthreads; i++)
		eng_th(e, i)->kicked = false;
	for (;;) {
		bool running = false;
		for (size_t i = 0; i < e->t->nthreads; i++)
			if (eng_state(e, i) == T_NATIVE || eng_state(e, i) == T_HANDLER) {
				running = true;
				kick(e, i);
			}
		if (!running)
			return;
		int r = wait_any_for(e, 1000, &flag_seen);
		if (r < 0)
			return;
		if (r == 0)
			for (size_t i = 0; i < e->t->nthreads; i++)
				eng_th(e, i)->kicked = false;
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
	eng_th(e, i)->kicked = false;
	/* (a syscall's exit stop takes the interrupt: resumed after it, the
	 * thread is interrupted again, not left to run to its next syscall) */
	for (int n = 0; n < 64 && eng_state(e, i) == T_SYSCALL; n++) {
		if (kick(e, i))
			return false;
		if (!eng_wait_one(e, tid))
			break;
	}
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
