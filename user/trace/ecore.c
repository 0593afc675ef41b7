/* The engine's state: its threads (one struct each), who owns the range,
 * the signals they carry, the one resume, the end conditions.  Every file
 * of the engine builds on this one; it calls none of them (the trap only
 * through its table). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/sigflag.h"
#include "common/waitstatus.h"
#include "ptrace/step.h"
#include "ptrace/tracee.h"
#include "trace/engine_int.h"

void eng_finish(struct gb_engine *e, enum gb_end why)
{
	if (!e->ended) {
		e->ended = true;
		e->end = why;
	}
}

struct ethread *eng_thread(struct gb_engine *e, size_t i)
{
	struct gb_thread *th = &e->t->threads[i];
	if (!th->eng) {
		struct ethread *et = calloc(1, sizeof(*et) + e->trap->ops->thread_size);
		if (!et)
			abort(); /* a thread we cannot follow: the trace would be wrong */
		et->vcpu = -1;
		et->state = T_STOPPED;
		th->eng = et;
	}
	return th->eng;
}

void eng_thread_reset(struct gb_engine *e, size_t i)
{
	struct ethread *et = eng_thread(e, i);
	memset(et, 0, sizeof(*et) + e->trap->ops->thread_size);
	et->vcpu = -1;
	et->state = T_STOPPED;
}

void eng_switch_trap(struct gb_engine *e, struct gb_trap *nt)
{
	for (size_t i = 0; i < e->t->nthreads; i++) {
		struct ethread *et = eng_thread(e, i);
		struct ethread *n = realloc(et, sizeof(*et) + nt->ops->thread_size);
		if (!n)
			abort(); /* (as eng_thread) */
		memset(n->trap, 0, nt->ops->thread_size);
		e->t->threads[i].eng = n;
	}
	e->trap = nt;
	TRAP_CALL0(e, start);
}

void eng_free_threads(struct gb_engine *e)
{
	for (size_t i = 0; i < e->t->nthreads; i++) {
		free(e->t->threads[i].eng);
		e->t->threads[i].eng = NULL;
	}
}

ssize_t eng_index(struct gb_engine *e, pid_t tid)
{
	for (size_t i = 0; i < e->t->nthreads; i++)
		if (e->t->threads[i].tid == tid && eng_state(e, i) != T_GONE)
			return (ssize_t)i;
	return -1;
}

size_t eng_live(const struct gb_engine *e)
{
	size_t n = 0;
	for (size_t i = 0; i < e->t->nthreads; i++)
		n += eng_state(e, i) != T_GONE;
	return n;
}

ssize_t eng_any_stopped(const struct gb_engine *e, ssize_t i)
{
	if (i >= 0 && eng_state(e, (size_t)i) == T_STOPPED)
		return i;
	for (size_t k = 0; k < e->t->nthreads; k++)
		if (eng_state(e, k) == T_STOPPED)
			return (ssize_t)k;
	return -1;
}

bool eng_inside(const struct gb_engine *e, uint64_t pc)
{
	if (TRAP_OPS(e)->covers)
		return TRAP_OPS(e)->covers(e->trap, pc);
	return eng_in_range(e, pc);
}

void eng_range_follow(struct gb_engine *e)
{
	if (e->range_gen == e->range->gen)
		return;
	e->range_gen = e->range->gen;
	gb_icache__clear(e->ic); /* decodes from before the range (or its bytes) were known */
}

/* The tracee's view (stopped/exited) follows the engine's state. */
void eng_set_state(struct gb_engine *e, size_t i, enum tstate s)
{
	struct ethread *t = eng_thread(e, i);
	t->state = s;
	t->stepped = false;
	if (s != T_STOPPED)
		t->want_entry = false;
	e->t->threads[i].stopped = s == T_STOPPED;
	e->t->threads[i].exited = s == T_GONE;
}

void eng_untrap(struct gb_engine *e, size_t i)
{
	struct gb_stop st;
	if (eng_state(e, i) != T_STOPPED || !eng_th(e, i)->stepped)
		return;
	if (gb_step_untrap(eng_tid(e, i), &st)) {
		eng_set_state(e, i, T_DYING); /* its exit is on its way */
		return;
	}
	if (st.kind == GB_STOP_EXITED || st.kind == GB_STOP_KILLED)
		eng_on_exit(e, i, &st);
	else if (st.kind == GB_STOP_SIGNAL)
		eng_keep_signal(e, i, st.sig);
	else
		eng_th(e, i)->stepped = false; /* (a group-stop: stopped all the same) */
}

void eng_listen(struct gb_engine *e, size_t i)
{
	e->t->threads[i].group_stop = true;
	eng_resume(e, i, PTRACE_LISTEN, 0, T_GROUP);
}

bool eng_park(struct gb_engine *e, size_t i)
{
	struct gb_thread *th = &e->t->threads[i];
	if (eng_state(e, i) != T_STOPPED || !th->group_stop)
		return false;
	int sig = gb_stop_event_sig(th->tid);
	if (sig == 0 && !th->pending_sig) {
		/* At another stop (a step, an injected call's end), from which
		 * PTRACE_LISTEN is refused: to an interrupt stop first, before
		 * any instruction (its trap flag cleared).  (A thread with a
		 * signal to take goes on to take it: that signal came while
		 * gebpf ran it, and a stop signal among them stops it again.) */
		struct gb_stop st;
		if (gb_step_untrap(th->tid, &st)) {
			eng_set_state(e, i, T_DYING);
			return true;
		}
		if (st.kind == GB_STOP_EXITED || st.kind == GB_STOP_KILLED) {
			eng_on_exit(e, i, &st);
			return true;
		}
		eng_th(e, i)->stepped = false;
		if (st.kind == GB_STOP_SIGNAL)
			eng_keep_signal(e, i, st.sig);
		sig = gb_stop_is_interrupt(&st) ? st.sig : 0;
	}
	if (!gb_sig_is_stop(sig)) {
		th->group_stop = false; /* a SIGCONT came: it runs as any other */
		return false;
	}
	eng_listen(e, i);
	return true;
}

void eng_park_all(struct gb_engine *e)
{
	for (size_t i = 0; i < e->t->nthreads; i++)
		if (e->t->threads[i].group_stop)
			eng_park(e, i);
}

bool eng_resume(struct gb_engine *e, size_t i, int req, int sig, enum tstate s)
{
	if (ptrace(req, eng_tid(e, i), 0, sig)) {
		eng_set_state(e, i, T_DYING);
		return false;
	}
	eng_set_state(e, i, s);
	eng_th(e, i)->resumes++;
	eng_th(e, i)->vals_synced = false;
	return true;
}

void eng_set_owner(struct gb_engine *e, ssize_t i)
{
	ssize_t was = e->owner;
	if (was == i)
		return;
	e->owner = i;
	/* Natively running threads keep their own CPUs; the owner shares the
	 * tracer's. */
	bool pin = trap_native(e) && eng_live(e) > 1;
	if (was >= 0) {
		TRAP_CALL(e, owner, (size_t)was, false);
		if (pin)
			gb_tracee_pin_thread(e->t, eng_tid(e, (size_t)was), false);
	}
	if (i >= 0) {
		TRAP_CALL(e, owner, (size_t)i, true);
		if (pin)
			gb_tracee_pin_thread(e->t, eng_tid(e, (size_t)i), true);
	}
}

bool eng_claim_watch(struct gb_engine *e, pid_t tid, int sig)
{
	if (!TRAP_OPS(e)->watch || !TRAP_OPS(e)->watch(e->trap, tid, sig))
		return false;
	gb_icache__bump(e->ic); /* the program changed the range's pages */
	return true;
}

int eng_take_signal(struct gb_engine *e, size_t i)
{
	struct gb_thread *th = &e->t->threads[i];
	int sig = th->pending_sig;
	th->pending_sig = 0;
	return sig && eng_claim_watch(e, th->tid, sig) ? 0 : sig;
}

void eng_on_exit(struct gb_engine *e, size_t i, const struct gb_stop *st)
{
	gb_info("trace: thread %d %s (%d)", eng_tid(e, i), gb_stop_kind_name(st->kind),
		st->kind == GB_STOP_EXITED ? st->code : st->sig);
	if (e->owner == (ssize_t)i)
		eng_set_owner(e, -1);
	TRAP_CALL(e, exit, i);
	eng_set_state(e, i, T_GONE);
	if (eng_tid(e, i) == e->t->pid) {
		e->exit_status = gb_wait_status(st->kind == GB_STOP_EXITED, st->code, st->sig);
		e->t->exited = true;
		e->t->exit_status = e->exit_status;
	}
}

void eng_run_natives(struct gb_engine *e)
{
	if (e->t->stopped_at > 0) { /* the first resume after the attach */
		gb_info("trace: pid %d stopped %.1f ms for the set-up", e->t->pid,
			(gb_mono_s() - e->t->stopped_at) * 1e3);
		e->t->stopped_at = 0;
	}
	for (size_t i = 0; i < e->t->nthreads; i++) {
		if (eng_state(e, i) != T_STOPPED || eng_th(e, i)->want_entry || (ssize_t)i == e->owner)
			continue;
		if (eng_park(e, i))
			continue; /* its process is stopped (job control) */
		int sig = eng_take_signal(e, i);
		bool sys = TRAP_OPS(e)->resume && TRAP_OPS(e)->resume(e->trap, e, i, sig);
		eng_resume(e, i, sys ? PTRACE_SYSCALL : PTRACE_CONT, sig, sys ? T_SYSCALL : T_NATIVE);
	}
}

void eng_check_limits(struct gb_engine *e, uint64_t iter)
{
	if (gb_sigflag_stop())
		eng_finish(e, GB_END_SIGNAL);
	else if (gb_jsonl__error(e->out))
		eng_finish(e, GB_END_OUTPUT);
	else if (eng_max_insns_done(e))
		eng_finish(e, GB_END_MAX_INSNS);
	else if (!eng_live(e))
		eng_finish(e, GB_END_EXITED);
	else if (e->o.duration > 0 && gb_mono_s() - e->t0 >= e->o.duration)
		eng_finish(e, GB_END_DURATION); /* a vDSO clock read: cheap next to a step */
	else if ((iter & 255) == 0)
		gb_progress_tick(&e->progress, e->out, e->vt);
}
