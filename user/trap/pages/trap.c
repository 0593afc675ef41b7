/* The page trap as the engine's entry trap (trace/trap.h): PROT_EXEC is
 * removed from the range's pages (the mechanism: trap/pages/pagetrap.h), threads
 * run natively and fault when they enter; the owner is stepped while its pc
 * is on the pages, every other thread held; leaving, the pages are
 * re-protected before anyone runs natively again.
 *
 * Ownership policy: when other threads live, the owner also yields when it
 * steps out of the range itself while still on the pages (code sharing a
 * page with the range), or after GB_OWNER_OUT_BUDGET such steps:
 * re-protected, it faults again at once and queues behind the threads
 * already waiting, so a thread looping on the range's page cannot starve
 * the others.
 *
 * The hold is bounded: an owner that has stayed GB_OWNER_SLICE_S in the
 * range while other threads live lends the process to them for
 * GB_OTHERS_SLICE_S (the pages re-protected, the owner kept stopped where
 * it is, still the owner), then they are held again and it goes on with
 * its next instruction.  A thread spinning in the range on a flag another
 * sets outside it, or waiting there for another's exit_group, is not held
 * up for the whole trace; the owner's own trace is the same.  A run in
 * translated code cannot be cut short from here, so the owner is stepped
 * while other threads live.
 *
 * A signal handler of the owner outside the pages runs natively, the pages
 * protected meanwhile (ehandler.c; docs/trace.md "Signals").
 *
 * After an exec the range's pages are trapped again in the new image; when
 * that cannot be done (the range's module is not mapped, or no code there)
 * the trap lifts itself and everything is single-stepped (as the null trap
 * does). */
#include <errno.h>
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
#include "trap/pages/pagetrap.h"
#include "trap/traps.h"

/* Out-of-range steps on the range's pages after which an owner yields to the
 * other threads. */
#define GB_OWNER_OUT_BUDGET 1024
/* An owner holds the others for this long at most at a time (seconds), and
 * then lets them run for that long. */
#define GB_OWNER_SLICE_S 0.020
#define GB_OTHERS_SLICE_S 0.005

struct page_trap {
	struct gb_trap base;
	struct gb_trace_range *range;
	struct gb_pagetrap *p;      /* NULL: lifted (everything is stepped) */
	bool vfork_window;          /* a vfork child shares the mm: trap lifted */
};

struct page_thread {
	bool last_in_range;  /* as owner: its previous step was in the range */
	uint32_t out_steps;  /* as owner: consecutive out-of-range steps on the pages */
	uint64_t stale_pc;   /* pc of an entry fault already dropped once (0: none) */
	double slice_t0;     /* as owner: when it last held the others */
};

#define PT(t) ((struct page_trap *)(t))

static struct page_thread *pth(struct gb_engine *e, size_t i) { return eng_trap_priv(e, i); }

static bool pages_native(const struct gb_trap *t) { return PT(t)->p != NULL; }

static bool pages_covers(const struct gb_trap *t, uint64_t pc)
{
	const struct page_trap *pt = (const struct page_trap *)t;
	return pt->p ? gb_pagetrap__covers(pt->p, pc) : gb_trace_range_has(pt->range, pc);
}

static bool pages_watch(struct gb_trap *t, pid_t tid, int sig)
{
	return PT(t)->p && gb_pagetrap__claim_signal(PT(t)->p, tid, sig);
}

/* A thread that faulted at the armed trap just before it was interrupted
 * still has that SIGSEGV queued; it surfaces at its first step as owner.
 * Dropped once per pc: a second one at the same pc is the program's own. */
static bool stale_entry_fault(struct page_trap *pt, struct page_thread *th,
			      const struct gb_stop *st, uint64_t pc)
{
	if (!gb_pagetrap__is_fetch_fault(pt->p, st, pc) || th->stale_pc == pc)
		return false;
	th->stale_pc = pc;
	return true;
}

static enum gb_trap_verdict pages_classify(struct gb_trap *t, struct gb_engine *e, size_t i,
					   const struct gb_stop *st, enum gb_trap_where where,
					   uint64_t pc)
{
	struct page_trap *pt = PT(t);
	struct user_regs_struct r;
	if (st->kind == GB_STOP_STEP) /* a step completed */
		pth(e, i)->stale_pc = 0;
	if (!pt->p || st->kind != GB_STOP_SIGNAL)
		return GB_TRAP_PROGRAM;
	switch (where) {
	case GB_AT_SYSCALL:
		/* Our entry fault, queued before it stopped. */
		return stale_entry_fault(pt, pth(e, i), st, pc) ? GB_TRAP_SWALLOW : GB_TRAP_PROGRAM;
	case GB_AT_STEP:
		if (stale_entry_fault(pt, pth(e, i), st, pc))
			return GB_TRAP_SWALLOW;
		break;
	case GB_AT_JIT_STUB:
		/* The entry fault, queued before this thread became the owner:
		 * delivered at its first return to user mode, before any
		 * instruction of the cache (which is executable: no fetch of it
		 * faults; a data fault stops at an instruction's copy). */
		if (gb_pagetrap__is_fetch_fault(pt->p, st, st->fault_addr))
			return GB_TRAP_SWALLOW;
		break;
	default:
		break;
	}
	if (pages_watch(t, st->tid, st->sig))
		return GB_TRAP_WATCH;
	/* Our trap: the fault is swallowed, the instruction re-runs. */
	if (where == GB_AT_NATIVE && gb_regs_get(st->tid, &r) == 0 &&
	    gb_pagetrap__is_entry(pt->p, st, r.rip))
		return GB_TRAP_ENTRY;
	return GB_TRAP_PROGRAM;
}

static void pages_owner(struct gb_trap *t, struct gb_engine *e, size_t i, bool on)
{
	pth(e, i)->slice_t0 = gb_mono_s();
	if (!on) {
		pth(e, i)->last_in_range = false;
		pth(e, i)->out_steps = 0;
	}
}

/* Our protection on (arm) or off through a stopped thread (any, if i < 0). */
static int protect(struct page_trap *pt, struct gb_engine *e, ssize_t i, bool on)
{
	if (!pt->p || (on ? gb_pagetrap__armed(pt->p) || pt->vfork_window
			  : !gb_pagetrap__touched(pt->p)))
		return 0;
	ssize_t k = eng_any_stopped(e, i);
	if (k < 0)
		return -ESRCH;
	pid_t tid = eng_tid(e, (size_t)k);
	int *sig = &e->t->threads[k].pending_sig;
	int r = on ? gb_pagetrap__arm(pt->p, tid, sig) : gb_pagetrap__disarm(pt->p, tid, sig);
	if (r && r != -ESRCH) {
		gb_err("pid %d: cannot %s the range's page%s: %s", e->t->pid,
		       on ? "protect" : "restore", on ? "s" : " protections", strerror(-r));
		eng_finish(e, GB_END_ERROR);
	}
	return r;
}

static int arm(struct page_trap *pt, struct gb_engine *e, ssize_t i) { return protect(pt, e, i, true); }
static int disarm(struct page_trap *pt, struct gb_engine *e, ssize_t i) { return protect(pt, e, i, false); }

static void pages_entered(struct gb_trap *t, struct gb_engine *e, size_t i)
{
	/* Code on a writable page may have changed while the program ran
	 * natively: re-check cached decodes (read-only pages change only
	 * through mprotect, which the watcher reports). */
	if (gb_pagetrap__writable(PT(t)->p))
		gb_icache__bump(e->ic);
}

/* Owner i (stopped, between two instructions) lends the process to the
 * other threads for GB_OTHERS_SLICE_S: the pages re-protected through it,
 * the others run natively (one entering the range waits at its entry), then
 * they are held again and the pages given back to it.  false when it did
 * not live through it (another thread's exit_group or exec). */
static bool lend(struct page_trap *pt, struct gb_engine *e, size_t i)
{
	if (arm(pt, e, (ssize_t)i))
		return eng_state(e, i) == T_STOPPED;
	eng_untrap(e, i); /* it waits, stopped, with no trap flag meanwhile */
	if (eng_state(e, i) != T_STOPPED)
		return false;
	gb_info("trace: thread %d lets the others run", eng_tid(e, i));
	double until = gb_mono_s() + GB_OTHERS_SLICE_S;
	for (double now; !e->ended && (now = gb_mono_s()) < until;) {
		eng_run_natives(e);
		eng_poll(e, true, (int)((until - now) * 1e3) + 1);
	}
	eng_hold_all(e);
	if (eng_state(e, i) != T_STOPPED)
		return false;
	if (!disarm(pt, e, (ssize_t)i))
		pages_entered(&pt->base, e, i);
	return true;
}

static bool pages_keep(struct gb_trap *t, struct gb_engine *e, size_t i, bool owner, uint64_t pc,
		       bool in_range, bool inside)
{
	struct page_trap *pt = PT(t);
	struct page_thread *th = pth(e, i);
	if (owner && inside && pt->p && !in_range && eng_live(e) > 1 &&
	    (th->last_in_range || th->out_steps >= GB_OWNER_OUT_BUDGET))
		inside = false;
	th->last_in_range = in_range;
	th->out_steps = in_range ? 0 : th->out_steps + 1;
	if (owner && inside && pt->p && !pt->vfork_window && eng_live(e) > 1 &&
	    gb_mono_s() - th->slice_t0 >= GB_OWNER_SLICE_S) {
		if (!lend(pt, e, i)) {
			/* Gone meanwhile: the step engine lets go of it. */
			e->owner = (ssize_t)i;
			return false;
		}
		th->slice_t0 = gb_mono_s();
	}
	return inside;
}

/* The owner runs a handler natively (ehandler.c): the pages protected
 * meanwhile (through it), so that the handler entering the range faults,
 * and lifted again when it is back.  Not while it blocks SIGTRAP (inside a
 * SIGTRAP handler): the mprotect is injected with a single-step, and the
 * kernel forces a step's trap on a thread that blocks it, resetting the
 * program's action to the default (docs/trace.md "Signals"). */
static bool pages_handler(struct gb_trap *t, struct gb_engine *e, size_t i, uint64_t ret)
{
	uint64_t mask;
	if (!PT(t)->p || PT(t)->vfork_window ||
	    ptrace(PTRACE_GETSIGMASK, eng_tid(e, i), (void *)sizeof(mask), &mask) ||
	    (mask & (1ull << (SIGTRAP - 1))))
		return false;
	return !arm(PT(t), e, (ssize_t)i) && eng_state(e, i) == T_STOPPED;
}

static void pages_handler_end(struct gb_trap *t, struct gb_engine *e, size_t i, bool back,
			      uint64_t ret)
{
	if (back && !disarm(PT(t), e, (ssize_t)i))
		pages_entered(t, e, i);
	/* (not back: the pages stay protected; a return there faults: an entry) */
}

static int pages_enter(struct gb_trap *t, struct gb_engine *e, size_t i)
{
	return disarm(PT(t), e, (ssize_t)i);
}


/* With one live thread, stopped and with no signal to deliver: arm on its
 * way out.  Otherwise other threads could run before its mprotect. */
static bool arm_on_resume(struct page_trap *pt, struct gb_engine *e)
{
	if (eng_live(e) != 1 || pt->vfork_window || gb_pagetrap__armed(pt->p))
		return false;
	for (size_t i = 0; i < e->t->nthreads; i++) {
		struct gb_thread *th = &e->t->threads[i];
		struct user_regs_struct r;
		/* Not a thread inside a syscall the kernel will restart: the
		 * trampoline would skip the restart. */
		if (eng_state(e, i) != T_STOPPED || th->pending_sig || gb_regs_get(th->tid, &r) ||
		    gb_regs_restarting_syscall(&r))
			continue;
		return gb_pagetrap__arm_on_resume(pt->p, th->tid, &r) == 1;
	}
	return false;
}

/* Protect, then resume.  A lone thread re-protects on its way out through
 * the trampoline (no stop); otherwise the mprotect is injected before
 * anyone runs.  If the process is dying (arming fails with ESRCH),
 * resuming fails too and the exits are collected by the loop. */
static void pages_before_run(struct gb_trap *t, struct gb_engine *e)
{
	if (!arm_on_resume(PT(t), e))
		arm(PT(t), e, -1);
}

static void pages_settle(struct gb_trap *t, pid_t tid)
{
	if (PT(t)->p)
		gb_pagetrap__settle(PT(t)->p, tid); /* never seen inside the trampoline */
}

/* A forked child has a copy of our page protections (and trampoline page):
 * it gets the program's back.  A vfork child shares our memory: the trap is
 * lifted for both, through the child (the parent is inside vfork until the
 * child execs or exits), until PTRACE_EVENT_VFORK_DONE. */
static void pages_child(struct gb_trap *t, struct gb_engine *e, pid_t child,
			enum gb_trap_child ev)
{
	struct page_trap *pt = PT(t);
	if (ev == GB_CHILD_VFORK_DONE) {
		pt->vfork_window = false;
		return;
	}
	if (!pt->p)
		return;
	if (ev == GB_CHILD_VFORK) {
		int sig = 0;
		if (gb_pagetrap__touched(pt->p))
			gb_pagetrap__disarm(pt->p, child, &sig);
		pt->vfork_window = true;
		if (sig)
			kill(child, sig);
	} else {
		gb_pagetrap__fix_child(pt->p, child);
	}
}

static void pages_exec(struct gb_trap *t, struct gb_engine *e)
{
	struct page_trap *pt = PT(t);
	const struct gb_trace_range *r = pt->range;
	if (gb_trace_range_exec(pt->range, e->t->pid) == -EAGAIN) {
		/* Its module is not mapped in the new image yet: looked for
		 * after each mmap, single-stepping (the page trap needs the
		 * range's pages). */
		if (pt->p) {
			gb_warn("pid %d: after exec the range's module is not mapped yet; "
				"single-stepping everything from here (slow; the probe trap follows "
				"it natively)", e->t->pid);
			gb_pagetrap__free(pt->p);
			pt->p = NULL;
		}
		return;
	}
	if (pt->p) {
		/* The old image's protections died with it: trap the range again
		 * in the new one (armed before anything runs natively). */
		gb_pagetrap__free(pt->p);
		pt->p = gb_pagetrap__new(e->t->pid, r->start, r->end);
		if (!pt->p)
			gb_warn("pid %d: after exec the range is not executable code; single-stepping "
				"everything from here", e->t->pid);
	}
}

static void pages_syscall_exit(struct gb_trap *t, struct gb_engine *e, size_t i)
{
	gb_trace_range_after_syscall(PT(t)->range, e->t->pid, eng_tid(e, i));
}

static bool pages_snap_begin(struct gb_trap *t, struct gb_engine *e, size_t i)
{
	if (!PT(t)->p || !gb_pagetrap__touched(PT(t)->p))
		return false;
	disarm(PT(t), e, (ssize_t)i);
	return true;
}

static void pages_snap_end(struct gb_trap *t, struct gb_engine *e, size_t i)
{
	if (e->owner != (ssize_t)i)
		arm(PT(t), e, (ssize_t)i);
}

/* Code on a writable page may change while the program runs natively; and
 * a run in translated code would hold the other threads for as long as it
 * lasts (the hold is bounded through the steps: pages_keep). */
static bool pages_translate_ok(struct gb_trap *t, struct gb_engine *e, size_t i)
{
	return !PT(t)->p || (!gb_pagetrap__writable(PT(t)->p) && eng_live(e) == 1);
}

static bool pages_must_restore(const struct gb_trap *t)
{
	return PT(t)->p && (gb_pagetrap__touched(PT(t)->p) || gb_pagetrap__has_tramp(PT(t)->p));
}

/* Leave every live thread with the program's own page protections. */
static void pages_teardown(struct gb_trap *t, struct gb_engine *e)
{
	struct page_trap *pt = PT(t);
	if (!pt->p)
		return;
	if (gb_pagetrap__touched(pt->p) && eng_live(e)) {
		ssize_t k = eng_any_stopped(e, -1);
		if (k >= 0)
			disarm(pt, e, k);
		else
			gb_err("pid %d: could not restore the range's page protections", e->t->pid);
	}
	/* No watcher signal is left for detach to deliver. */
	for (size_t i = 0; i < e->t->nthreads; i++)
		e->t->threads[i].pending_sig = eng_take_signal(e, i);
	/* The trampoline page goes too (hold_all settled anyone inside it). */
	for (size_t i = 0; i < e->t->nthreads; i++)
		if (eng_state(e, i) == T_STOPPED) {
			gb_pagetrap__release(pt->p, eng_tid(e, i), &e->t->threads[i].pending_sig);
			break;
		}
	/* Threads stopped at our entry fault have no signal pending: they
	 * re-run the instruction, now executable. */
}

static uint64_t pages_entries(const struct gb_trap *t)
{
	struct gb_pagetrap_stats ps = { 0 };
	if (PT(t)->p)
		gb_pagetrap__stats(PT(t)->p, &ps);
	return ps.entries;
}

static void pages_free(struct gb_trap *t)
{
	gb_pagetrap__free(PT(t)->p);
	free(t);
}

static const struct gb_trap_ops pages_ops = {
	.name = "page",
	.thread_size = sizeof(struct page_thread),
	.native = pages_native,
	.covers = pages_covers,
	.settle = pages_settle,
	.classify = pages_classify,
	.watch = pages_watch,
	.hold_on_enter = true,
	.enter = pages_enter,
	.entered = pages_entered,
	.owner = pages_owner,
	.keep = pages_keep,
	.translate_ok = pages_translate_ok,
	.handler = pages_handler,
	.handler_end = pages_handler_end,
	.before_run = pages_before_run,
	.syscall_exit = pages_syscall_exit,
	.child = pages_child,
	.exec = pages_exec,
	.snap_begin = pages_snap_begin,
	.snap_end = pages_snap_end,
	.must_restore = pages_must_restore,
	.teardown = pages_teardown,
	.entries = pages_entries,
	.free = pages_free,
};

struct gb_trap *gb_trap_pages_new(pid_t pid, struct gb_trace_range *r)
{
	struct page_trap *pt = calloc(1, sizeof(*pt));
	if (!pt)
		return NULL;
	pt->base.ops = &pages_ops;
	pt->range = r;
	pt->p = gb_pagetrap__new(pid, r->start, r->end);
	if (!pt->p) {
		free(pt);
		return NULL;
	}
	return &pt->base;
}
