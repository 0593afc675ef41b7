/* The engine's loop: see engine.h.
 *
 * One thread at a time owns the range: while it is inside (its PC in the
 * range, or on the trapped pages under the page trap), only it is stepped
 * through the range, so in-range stretches are never interleaved and the
 * output is the same whatever the trap.
 *
 * - no trap (--trap none): every thread is single-stepped, round-robin, one
 *   instruction each while nobody owns the range.
 * - probe trap: threads run natively (PTRACE_CONT); a probe at an entry
 *   stops a thread after the entry instruction (emitted from the registers
 *   the BPF program recorded); it owns the range and is stepped until its
 *   PC leaves the range, then runs natively again.  The others run on and
 *   queue at the entries meanwhile.
 * - page trap: threads run natively with PROT_EXEC removed from the range's
 *   pages; an entry fault makes the thread the owner (the others are
 *   stopped, exec restored), it is stepped until its PC leaves the pages,
 *   then the pages are re-protected and everyone runs again.
 */
#include "trace/engine.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <time.h>

#include "common/grow.h"
#include "common/log.h"
#include "common/sigflag.h"
#include "ptrace/regs.h"
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

void eng_finish(struct gb_engine *e, enum gb_end why)
{
	if (!e->ended) {
		e->ended = true;
		e->end = why;
	}
}

struct ethread *eng_thread(struct gb_engine *e, size_t i)
{
	size_t cap = e->et_cap;
	if (i >= cap) {
		if (GB_GROW(&e->et, &cap, i + 1))
			abort(); /* a thread we cannot follow: the trace would be wrong */
		for (size_t k = e->et_cap; k < cap; k++)
			e->et[k] = (struct ethread){ .vcpu = -1, .state = T_STOPPED };
		e->et_cap = cap;
	}
	return &e->et[i];
}

ssize_t eng_index(struct gb_engine *e, pid_t tid)
{
	for (size_t i = 0; i < e->t->nthreads; i++)
		if (e->t->threads[i].tid == tid && e->et[i].state != T_GONE)
			return (ssize_t)i;
	return -1;
}

size_t eng_live(const struct gb_engine *e)
{
	size_t n = 0;
	for (size_t i = 0; i < e->t->nthreads; i++)
		n += e->et[i].state != T_GONE;
	return n;
}

bool eng_inside(const struct gb_engine *e, uint64_t pc)
{
	if (e->trap)
		return gb_pagetrap__covers(e->trap, pc);
	if (e->range_pending)
		return false;
	return (!e->o.has_start || pc >= e->o.start) && (!e->o.has_end || pc <= e->o.end);
}

void eng_sync_range(struct gb_engine *e)
{
	uint64_t s, en;
	if (!e->probes)
		return;
	bool known = gb_probes__range(e->probes, &s, &en);
	if (known && (e->range_pending || s != e->o.start || en != e->o.end)) {
		e->o.start = s;
		e->o.end = en;
		gb_jsonl__set_range(e->out, true, s, true, en);
		gb_icache__clear(e->ic); /* decodes from before the probes' bytes were known */
	}
	e->range_pending = !known;
}

void eng_set_owner(struct gb_engine *e, ssize_t i)
{
	ssize_t was = e->owner;
	if (was == i)
		return;
	e->owner = i;
	if (was >= 0) {
		struct ethread *t = &e->et[was];
		t->last_in_range = false;
		t->out_steps = 0;
		if (e->probes)
			gb_probes__stepping(e->probes, e->t->threads[was].tid, false);
		/* Back to running natively, on its own CPUs. */
		if (eng_trapped(e) && eng_live(e) > 1)
			gb_tracee_pin_thread(e->t, e->t->threads[was].tid, false);
	}
	if (i >= 0) {
		if (e->probes)
			gb_probes__stepping(e->probes, e->t->threads[i].tid, true);
		if (eng_trapped(e) && eng_live(e) > 1)
			gb_tracee_pin_thread(e->t, e->t->threads[i].tid, true);
	}
}

bool eng_claim_watch(struct gb_engine *e, pid_t tid, int sig)
{
	if (!e->trap || !gb_pagetrap__claim_signal(e->trap, tid, sig))
		return false;
	gb_icache__bump(e->ic); /* the program changed the range's pages */
	return true;
}

int eng_take_signal(struct gb_engine *e, size_t i)
{
	/* (A probe's signal never gets here: it is claimed at its stop.) */
	struct gb_thread *th = &e->t->threads[i];
	int sig = th->pending_sig;
	th->pending_sig = 0;
	return sig && eng_claim_watch(e, th->tid, sig) ? 0 : sig;
}

/* The tracee's view (stopped/exited) follows the engine's state. */
void eng_set_state(struct gb_engine *e, size_t i, enum tstate s)
{
	struct ethread *t = eng_thread(e, i);
	t->state = s;
	if (s != T_STOPPED)
		t->want_entry = false;
	e->t->threads[i].stopped = s == T_STOPPED;
	e->t->threads[i].exited = s == T_GONE;
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
	e->out = out;
	e->owner = -1;
	e->vt = o->first_vt;
	e->ic = gb_icache__new();
	e->snap_pc_done = calloc(o->nsnap_pcs + 1, sizeof(bool));
	if (o->nsnap_vts) {
		uint64_t *v = malloc(o->nsnap_vts * sizeof(*v));
		if (v) {
			memcpy(v, o->snap_vts, o->nsnap_vts * sizeof(*v));
			qsort(v, o->nsnap_vts, sizeof(*v), cmp_u64);
		}
		e->o.snap_vts = v;
	}
	if (!e->ic || !e->snap_pc_done) {
		gb_engine__free(e);
		return NULL;
	}
	for (size_t i = 0; i < t->nthreads; i++)
		eng_set_state(e, i, t->threads[i].exited ? T_GONE : T_STOPPED);
	/* The probe trap comes set up by the caller; the page trap needs a
	 * bounded range; without one everything is in range and is stepped
	 * anyway. */
	e->probes = o->trap == GB_TRAP_PROBES ? o->probes : NULL;
	e->range_pending = o->range_pending;
	if (e->probes) {
		gb_icache__set_patch(e->ic, gb_probes__patch, e->probes);
		eng_sync_range(e);

		/* Threads stopped inside the range (attach) own it in turn. */
		struct user_regs_struct r;
		for (size_t i = 0; i < t->nthreads; i++)
			if (e->et[i].state == T_STOPPED && gb_regs_get(t->threads[i].tid, &r) == 0 &&
			    eng_inside(e, r.rip))
				e->et[i].want_entry = true;
	} else if (o->trap != GB_TRAP_NONE && o->has_start && o->has_end) {
		e->trap = gb_pagetrap__new(t->pid, o->start, o->end);
		if (!e->trap) {
			/* Nothing to trap (no code in the range yet, or the range
			 * covers every syscall instruction we could inject through):
			 * single-step everything instead; the trace is the same. */
			gb_warn("pid %d: no page trap for 0x%llx-0x%llx; single-stepping everything "
				"(slow)", t->pid, (unsigned long long)o->start, (unsigned long long)o->end);
		}
	}
	/* The translating engine runs the owner between entries of either trap. */
	if (o->jit && eng_trapped(e) && !(e->jit = eng_jit_new())) {
		gb_engine__free(e);
		return NULL;
	}
	return e;
}

void gb_engine__free(struct gb_engine *e)
{
	if (!e)
		return;
	gb_pagetrap__free(e->trap);
	eng_jit_free(e);
	gb_icache__free(e->ic);
	free(e->et);
	free(e->detached);
	free(e->pending_kids);
	free(e->snap_pc_done);
	free((void *)(e->o.nsnap_vts ? e->o.snap_vts : NULL));
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
	if (e->trap) {
		struct gb_pagetrap_stats ps;
		gb_pagetrap__stats(e->trap, &ps);
		s->entries = ps.entries;
	}
}

static double elapsed(const struct gb_engine *e)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - e->t0.tv_sec) + (double)(now.tv_nsec - e->t0.tv_nsec) / 1e9;
}

/* Handle every event that is ready; with block, first wait for one, at most
 * timeout_ms (SIGCHLD is blocked while the engine runs, so sigtimedwait
 * cannot miss one).  Ctrl-C interrupts the wait. */
static void poll_events(struct gb_engine *e, bool block, int timeout_ms)
{
	struct gb_stop st;
	int r = gb_wait(-1, WNOHANG, &st, true);
	/* --duration ends on time, not at the next 100 ms tick */
	double left = e->o.duration > 0 ? e->o.duration - elapsed(e) : 1e9;
	if (left * 1e3 < timeout_ms)
		timeout_ms = left > 0 ? (int)(left * 1e3) + 1 : 0;
	if (r == -EAGAIN && block) {
		sigset_t chld;
		sigemptyset(&chld);
		sigaddset(&chld, SIGCHLD);
		struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
		sigtimedwait(&chld, NULL, &ts);
		r = gb_wait(-1, WNOHANG, &st, true);
	}
	while (r == 0) {
		eng_async(e, &st);
		r = gb_wait(-1, WNOHANG, &st, true);
	}
}

static bool any_running(const struct gb_engine *e)
{
	for (size_t i = 0; i < e->t->nthreads; i++)
		if (e->et[i].state == T_NATIVE || e->et[i].state == T_SYSCALL ||
		    e->et[i].state == T_GROUP || e->et[i].state == T_DYING)
			return true;
	return false;
}

static ssize_t pick(struct gb_engine *e)
{
	size_t n = e->t->nthreads;
	for (size_t k = 0; k < n; k++) {
		size_t i = (e->rr + k) % n;
		if (e->et[i].state == T_STOPPED) {
			e->rr = (i + 1) % n;
			return (ssize_t)i;
		}
	}
	return -1;
}

/* With one live thread, stopped and with no signal to deliver: arm on its
 * way out.  Otherwise other threads could run before its mprotect. */
static bool arm_on_resume(struct gb_engine *e)
{
	if (eng_live(e) != 1 || e->vfork_window || gb_pagetrap__armed(e->trap))
		return false;
	for (size_t i = 0; i < e->t->nthreads; i++) {
		struct gb_thread *th = &e->t->threads[i];
		struct user_regs_struct r;
		/* Not a thread inside a syscall the kernel will restart: the
		 * trampoline would skip the restart. */
		if (e->et[i].state != T_STOPPED || th->pending_sig || gb_regs_get(th->tid, &r) ||
		    gb_regs_restarting_syscall(&r))
			continue;
		return gb_pagetrap__arm_on_resume(e->trap, th->tid, &r) == 1;
	}
	return false;
}

/* Page-trap mode with no owner: hand the range to a thread waiting at its
 * entry, or let everyone run natively until something happens. */
static void trap_schedule(struct gb_engine *e)
{
	size_t n = e->t->nthreads;
	/* Round-robin among the threads waiting at the entry, starting after
	 * the last owner, so a hot thread cannot starve the others. */
	for (size_t k = 0; k < n; k++) {
		size_t i = (e->rr + k) % n;
		if (e->et[i].state != T_STOPPED || !e->et[i].want_entry)
			continue;
		eng_hold_all(e);
		if (e->et[i].state != T_STOPPED)
			return; /* it died meanwhile */
		e->et[i].want_entry = false;
		if (eng_disarm(e, (ssize_t)i))
			return;
		eng_set_owner(e, (ssize_t)i);
		e->rr = (i + 1) % n;
		/* Code on a writable page may have changed while the program ran
		 * natively: re-check cached decodes (read-only pages change only
		 * through mprotect, which the watcher reports). */
		if (gb_pagetrap__writable(e->trap))
			gb_icache__bump(e->ic);
		gb_info("trace: thread %d enters the range at vt %llu", e->t->threads[i].tid,
			(unsigned long long)e->vt);
		return;
	}
	/* Protect, then resume.  A lone thread re-protects on its way out
	 * through the trampoline (no stop); otherwise the mprotect is injected
	 * before anyone runs.  If the process is dying (arming fails with
	 * ESRCH), resuming fails too and the exits are collected below. */
	if (!arm_on_resume(e))
		eng_arm(e, -1);
	if (e->ended)
		return;
	for (size_t k = 0; k < n; k++) {
		size_t i = (e->rr + k) % n;
		if (e->et[i].state != T_STOPPED)
			continue;
		struct gb_thread *th = &e->t->threads[i];
		int sig = eng_take_signal(e, i);
		if (ptrace(PTRACE_CONT, th->tid, 0, sig) == 0)
			eng_set_state(e, i, T_NATIVE);
		else
			eng_set_state(e, i, T_DYING);
	}
	poll_events(e, true, 100);
}

/* Resume every stopped thread that is not waiting for the range. */
void eng_run_natives(struct gb_engine *e)
{
	for (size_t i = 0; i < e->t->nthreads; i++) {
		if (e->et[i].state != T_STOPPED || e->et[i].want_entry || (ssize_t)i == e->owner)
			continue;
		int sig = eng_take_signal(e, i);
		struct user_regs_struct r;
		/* A handler that interrupts the range (this thread was stopped
		 * inside it after a probe) returns into its middle: an entry. */
		if (sig && e->probes && gb_regs_get(e->t->threads[i].tid, &r) == 0 &&
		    eng_inside(e, r.rip))
			gb_probes__add_entry(e->probes, r.rip);
		if (ptrace(PTRACE_CONT, e->t->threads[i].tid, 0, sig) == 0)
			eng_set_state(e, i, T_NATIVE);
		else
			eng_set_state(e, i, T_DYING);
	}
}

/* Probe-trap mode with no owner: hand the range to a thread stopped at an
 * entry (round-robin), or let everyone run until something happens. */
static void probe_schedule(struct gb_engine *e)
{
	size_t n = e->t->nthreads;
	for (size_t k = 0; k < n; k++) {
		size_t i = (e->rr + k) % n;
		if (e->et[i].state != T_STOPPED || !e->et[i].want_entry)
			continue;
		e->et[i].want_entry = false;
		e->rr = (i + 1) % n;
		e->st.entries++;
		eng_set_owner(e, (ssize_t)i);
		gb_info("trace: thread %d enters the range at vt %llu", e->t->threads[i].tid,
			(unsigned long long)e->vt);
		eng_emit_hit(e, i);
		return;
	}
	eng_run_natives(e);
	poll_events(e, true, 100);
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
	else if (e->o.duration > 0 && elapsed(e) >= e->o.duration)
		eng_finish(e, GB_END_DURATION); /* a vDSO clock read: cheap next to a step */
	else if ((iter & 255) == 0)
		gb_progress_tick(&e->progress, e->out, e->vt);
}

/* Leave every live thread stopped (or in a syscall/group-stop, which detach
 * handles) with the program's own page protections. */
static void teardown(struct gb_engine *e)
{
	eng_hold_all(e);
	if (e->trap && gb_pagetrap__touched(e->trap) && eng_live(e)) {
		ssize_t k = -1;
		for (size_t i = 0; i < e->t->nthreads && k < 0; i++)
			if (e->et[i].state == T_STOPPED)
				k = (ssize_t)i;
		if (k < 0) {
			/* Everyone is in a syscall: interrupt one to inject through. */
			for (size_t i = 0; i < e->t->nthreads && k < 0; i++) {
				if (e->et[i].state != T_SYSCALL)
					continue;
				struct gb_stop st;
				ptrace(PTRACE_INTERRUPT, e->t->threads[i].tid, 0, 0);
				if (gb_wait(e->t->threads[i].tid, 0, &st, false) == 0) {
					eng_async(e, &st);
					if (e->et[i].state == T_STOPPED)
						k = (ssize_t)i;
				}
			}
		}
		if (k >= 0)
			eng_disarm(e, k);
		else
			gb_err("pid %d: could not restore the range's page protections", e->t->pid);
	}
	/* No watcher signal is left for detach to deliver. */
	for (size_t i = 0; e->trap && i < e->t->nthreads; i++)
		e->t->threads[i].pending_sig = eng_take_signal(e, i);
	/* Probe hits of threads stopped at an entry after the end are not in
	 * the trace (their instruction ran after it ended); no probe signal is
	 * left for detach to deliver. */
	for (size_t i = 0; e->probes && i < e->t->nthreads; i++) {
		e->et[i].want_entry = e->et[i].has_hit = false;
		e->t->threads[i].pending_sig = eng_take_signal(e, i);
	}
	/* The trampoline page goes too (hold_all settled anyone inside it). */
	for (size_t i = 0; e->trap && i < e->t->nthreads; i++)
		if (e->et[i].state == T_STOPPED) {
			gb_pagetrap__release(e->trap, e->t->threads[i].tid, &e->t->threads[i].pending_sig);
			break;
		}
	eng_jit_teardown(e);
	/* Threads stopped at our entry fault have no signal pending: they
	 * re-run the instruction, now executable. */
}

enum gb_end gb_engine__run(struct gb_engine *e)
{
	sigset_t chld, old;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old);
	clock_gettime(CLOCK_MONOTONIC, &e->t0);
	gb_progress_init(&e->progress);
	/* Pinned: the thread being stepped shares the tracer's CPU.  Under the
	 * page trap only the owner is stepped, and the other threads keep
	 * their own CPUs so they run (and reach the range) in parallel. */
	if (e->o.pin)
		gb_tracee_pin(e->t, !eng_trapped(e) || eng_live(e) == 1);
	uint64_t iter = 0;
	while (!e->ended) {
		eng_check_limits(e, ++iter);
		if (e->ended)
			break;
		if (any_running(e))
			poll_events(e, false, 0);
		if (e->owner >= 0 && e->et[e->owner].state == T_STOPPED) {
			if (e->probes)
				eng_run_natives(e); /* the others run on meanwhile */
			if (!e->jit || !eng_jit_run(e, (size_t)e->owner))
				eng_step(e, (size_t)e->owner);
			continue;
		}
		if (e->owner >= 0) {
			/* The owner is blocked (group-stop) or gone. */
			if (e->et[e->owner].state == T_GONE)
				eng_set_owner(e, -1);
			else
				poll_events(e, true, 100);
			continue;
		}
		if (e->probes) {
			probe_schedule(e);
			continue;
		}
		if (e->trap) {
			trap_schedule(e);
			continue;
		}
		ssize_t i = pick(e);
		if (i < 0)
			poll_events(e, true, 100); /* everyone is in a syscall or stopped */
		else
			eng_step(e, (size_t)i);
	}
	gb_progress_done(&e->progress);
	teardown(e);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return e->end;
}
