/* The engine's loop: see engine.h, and docs/trace.md "Inside the engine".
 *
 * One thread at a time owns the range: while it is inside (its PC in the
 * range, or on what the entry trap covers), only it is run through the
 * range (stepped, estep.c, or translated, ejit.c), so in-range stretches are
 * never interleaved and the output is the same whatever the trap.
 *
 * - A trap that runs threads natively (trap.h): nobody owning the range, a
 *   thread waiting at an entry gets it (round-robin among them); else the
 *   trap is set and the stopped threads run natively until one enters.
 * - The null trap: every thread is single-stepped, round-robin, one
 *   instruction each while nobody owns the range.
 */
#include "trace/engine.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>

#include "common/clock.h"
#include "common/log.h"
#include "ptrace/regs.h"
#include "ptrace/tracee.h"
#include "trace/engine_int.h"

const char *gb_end_name(enum gb_end why)
{
	static const char *const n[] = {
		[GB_END_EXITED] = "target exited", [GB_END_MAX_INSNS] = "max-insns reached",
		[GB_END_DURATION] = "duration elapsed", [GB_END_SIGNAL] = "interrupted",
		[GB_END_OUTPUT] = "output failed", [GB_END_ERROR] = "internal error",
	};
	return (unsigned)why < sizeof(n) / sizeof(n[0]) ? n[why] : "?";
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct gb_engine *gb_engine__new(struct gb_tracee *t, const struct gb_engine_opts *o,
				 struct gb_jsonl *out)
{
	struct gb_engine *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->t = t;
	e->o = *o;
	e->o.snap_vts = NULL;
	e->o.nsnap_vts = 0;
	e->out = out;
	e->trap = o->trap;
	e->range = o->range;
	e->range_gen = o->range->gen;
	e->owner = -1;
	e->vt = o->first_vt;
	e->ic = gb_icache__new();
	e->snap_pc_done = calloc(o->nsnap_pcs + 1, sizeof(bool));
	if (o->nsnap_vts) {
		uint64_t *v = malloc(o->nsnap_vts * sizeof(*v));
		if (!v) {
			gb_engine__free(e);
			return NULL;
		}
		memcpy(v, o->snap_vts, o->nsnap_vts * sizeof(*v));
		qsort(v, o->nsnap_vts, sizeof(*v), cmp_u64);
		e->o.snap_vts = v;
		e->o.nsnap_vts = o->nsnap_vts;
	}
	if (!e->ic || !e->snap_pc_done) {
		gb_engine__free(e);
		return NULL;
	}
	for (size_t i = 0; i < t->nthreads; i++)
		eng_set_state(e, i, t->threads[i].exited ? T_GONE : T_STOPPED);
	TRAP_CALL0(e, start);
	/* The translating engine runs the owner between entries of a trap. */
	if (o->jit && trap_native(e) && !(e->jit = eng_jit_new())) {
		eng_free_threads(e);
		gb_engine__free(e);
		return NULL;
	}
	if (o->values && !(e->vals = eng_vals_new())) {
		eng_free_threads(e);
		gb_engine__free(e);
		return NULL;
	}
	return e;
}

void gb_engine__free(struct gb_engine *e)
{
	if (!e)
		return;
	eng_jit_free(e);
	eng_vals_free(e->vals);
	gb_icache__free(e->ic);
	free(e->detached);
	free(e->pending_kids);
	free(e->snap_pc_done);
	free((void *)e->o.snap_vts);
	free(e);
}

int gb_engine__exit_status(const struct gb_engine *e) { return e->exit_status; }
uint64_t gb_engine__vt(const struct gb_engine *e) { return e->vt; }

void gb_engine__stats(const struct gb_engine *e, struct gb_engine_stats *s)
{
	struct gb_icache_stats ic;
	*s = e->st;
	s->in_range = e->vt;
	gb_icache__stats(e->ic, &ic);
	s->decodes = ic.decodes;
	s->revalidations = ic.validations;
	s->entries = TRAP_OPS(e)->entries ? TRAP_OPS(e)->entries(e->trap) : 0;
}

static bool any_running(const struct gb_engine *e)
{
	for (size_t i = 0; i < e->t->nthreads; i++) {
		enum tstate s = eng_state(e, i);
		if (s == T_NATIVE || s == T_SYSCALL || s == T_GROUP || s == T_DYING)
			return true;
	}
	return false;
}

/* The null trap: the next stopped thread, round-robin. */
static ssize_t pick(struct gb_engine *e)
{
	size_t n = e->t->nthreads;
	for (size_t k = 0; k < n; k++) {
		size_t i = (e->rr + k) % n;
		if (eng_state(e, i) == T_STOPPED) {
			e->rr = (i + 1) % n;
			return (ssize_t)i;
		}
	}
	return -1;
}

/* A trap that runs threads natively, with no owner: hand the range to a
 * thread waiting at an entry (round-robin, starting after the last owner,
 * so a hot thread cannot starve the others), or let everyone run natively
 * until something happens. */
static void schedule(struct gb_engine *e)
{
	size_t n = e->t->nthreads;
	for (size_t k = 0; k < n; k++) {
		size_t i = (e->rr + k) % n;
		if (eng_state(e, i) != T_STOPPED || !eng_th(e, i)->want_entry)
			continue;
		if (TRAP_OPS(e)->hold_on_enter) {
			eng_hold_all(e);
			if (eng_state(e, i) != T_STOPPED)
				return; /* it died meanwhile */
		}
		eng_th(e, i)->want_entry = false;
		if (TRAP_OPS(e)->enter && TRAP_OPS(e)->enter(e->trap, e, i)) {
			if (eng_th(e, i)->want_entry && eng_state(e, i) == T_STOPPED)
				continue; /* not yet (it waits, stopped): after the next idle */
			return;
		}
		eng_set_owner(e, (ssize_t)i);
		e->rr = (i + 1) % n;
		gb_info("trace: thread %d enters the range at vt %llu", eng_tid(e, i),
			(unsigned long long)e->vt);
		TRAP_CALL(e, entered, i);
		return;
	}
	TRAP_CALL0(e, before_run);
	if (e->ended)
		return;
	eng_run_natives(e);
	eng_poll(e, true, TRAP_OPS(e)->poll_ms ? (int)TRAP_OPS(e)->poll_ms : 100);
	TRAP_CALL0(e, idle);
}

/* Interrupt thread i, in a syscall or listening in a group-stop, for the
 * end, until it is stopped (or gone).  The stop its interrupt brings may
 * come after others, each handled as it comes, which can resume it: a
 * signal for the program (a handler watched to its rt_sigreturn runs on
 * under PTRACE_SYSCALL), a syscall's exit; and one in a syscall whose
 * process is being stopped reports the group-stop and listens (eng_listen).
 * (A single interrupt and wait left a thread running a SIGPROF handler
 * under PTRACE_SYSCALL, in the patch trap's cache, through the end: the
 * cache was unmapped under it, pt_signest, 1 run in 200.) */
static void interrupt_held(struct gb_engine *e, size_t i)
{
	pid_t tid = eng_tid(e, i);
	for (int n = 0; n < 64; n++) {
		enum tstate s = eng_state(e, i);
		if (s != T_SYSCALL && s != T_GROUP && s != T_NATIVE)
			return;
		if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) || !eng_wait_one(e, tid))
			return;
	}
}

/* Thread i, in a syscall or listening in a group-stop, stopped for the
 * end: true when it is (detach restarts a syscall it was in, and puts it
 * back into its process's group-stop). */
static bool hold_one(struct gb_engine *e, size_t i)
{
	if (eng_state(e, i) == T_SYSCALL && eng_stop_in_syscall(e, i))
		return true;
	if (eng_state(e, i) == T_GROUP)
		eng_interrupt(e, i);
	return eng_state(e, i) == T_STOPPED;
}

/* Leave every live thread stopped (or in a syscall/group-stop, which detach
 * handles) with nothing of the trap or the code cache in the target. */
/* Every thread is held.  Any stopped thread runs the code cache's munmap;
 * when none can, a thread in a syscall (e.g. the one thread, stepped into a
 * fork, vfork or wait4) is interrupted for it, and left there: detach
 * restarts its call. */
static void jit_teardown(struct gb_engine *e)
{
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < e->t->nthreads; i++) {
			if (pass && !hold_one(e, i))
				continue;
			if (eng_jit_unmap(e, i))
				return;
		}
	eng_jit_forget(e);
}

static void teardown(struct gb_engine *e)
{
	if (!e->t->launched)
		e->t->stopped_at = gb_mono_s(); /* (until the detach: -v) */
	eng_hold_all(e);
	/* No trap flag left while the probes go and the pages are restored
	 * (tens of ms): a SIGKILL of gebpf and its worker meanwhile. */
	for (size_t i = 0; i < e->t->nthreads; i++)
		eng_untrap(e, i);
	if (TRAP_OPS(e)->must_restore && TRAP_OPS(e)->must_restore(e->trap) && eng_live(e) &&
	    eng_any_stopped(e, -1) < 0) {
		/* Everyone is in a syscall or a group-stop: interrupt one to
		 * work through. */
		for (size_t i = 0; i < e->t->nthreads; i++) {
			if (eng_state(e, i) != T_SYSCALL && eng_state(e, i) != T_GROUP)
				continue;
			interrupt_held(e, i);
			if (eng_state(e, i) == T_STOPPED)
				break;
		}
	}
	/* (and any thread the hold left running natively: its wait for the
	 * stops can end early, as when the worker's SIGTERM comes, and a
	 * churning program's main thread was once left so, the cache kept
	 * for it: pt_relchurn, 4 kill runs in 452) */
	if (TRAP_OPS(e)->stop_all)
		for (size_t i = 0; i < e->t->nthreads; i++)
			if (eng_state(e, i) == T_SYSCALL || eng_state(e, i) == T_GROUP ||
			    eng_state(e, i) == T_NATIVE)
				interrupt_held(e, i);
	TRAP_CALL0(e, teardown);
	jit_teardown(e);
}

enum gb_end gb_engine__run(struct gb_engine *e)
{
	sigset_t chld, old;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old);
	e->t0 = gb_mono_s();
	gb_progress_init(&e->progress);
	/* Pinned: the thread being stepped shares the tracer's CPU.  Under a
	 * trap only the owner is stepped, and the other threads keep their own
	 * CPUs so they run (and reach the range) in parallel. */
	if (e->o.pin)
		gb_tracee_pin(e->t, !trap_native(e) || eng_live(e) == 1);
	uint64_t iter = 0;
	for (;;) {
		eng_check_limits(e, ++iter);
		bool jit = e->owner >= 0 && eng_state(e, (size_t)e->owner) == T_JIT;
		if (e->ended && !jit &&
		    (e->owner < 0 || eng_state(e, (size_t)e->owner) != T_HANDLER))
			break;
		if (jit) {
			/* Its stops come through the dispatcher; the end
			 * interrupts it, and it is given back. */
			eng_jit_tick(e, (size_t)e->owner);
			if (!TRAP_OPS(e)->hold_on_enter)
				eng_run_natives(e); /* the others run on meanwhile */
			eng_poll(e, true, 100);
			continue;
		}
		if (any_running(e))
			eng_poll(e, false, 0);
		/* A thread of a stopped process is never run, nor made the
		 * owner (the attach found it so, or it was held meanwhile). */
		eng_park_all(e);
		eng_range_follow(e);
		if (e->owner >= 0 && eng_state(e, (size_t)e->owner) == T_STOPPED) {
			if (trap_native(e) && !TRAP_OPS(e)->hold_on_enter)
				eng_run_natives(e); /* the others run on meanwhile */
			if (!eng_jit_enter(e, (size_t)e->owner))
				eng_step(e, (size_t)e->owner);
			continue;
		}
		if (e->owner >= 0 && eng_state(e, (size_t)e->owner) == T_HANDLER) {
			/* In a signal handler, natively: its stops come through
			 * the dispatcher (ehandler.c). */
			eng_handler_tick(e, (size_t)e->owner);
			if (!TRAP_OPS(e)->hold_on_enter)
				eng_run_natives(e);
			eng_poll(e, true, 20);
			continue;
		}
		if (e->owner >= 0) {
			/* The owner is blocked (group-stop) or gone. */
			if (eng_state(e, (size_t)e->owner) == T_GONE)
				eng_set_owner(e, -1);
			else
				eng_poll(e, true, 100);
			continue;
		}
		if (trap_native(e)) {
			schedule(e);
			continue;
		}
		ssize_t i = pick(e);
		if (i < 0)
			eng_poll(e, true, 100); /* everyone is in a syscall or stopped */
		else
			eng_step(e, (size_t)i);
	}
	gb_progress_done(&e->progress);
	teardown(e);
	eng_free_threads(e);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return e->end;
}
