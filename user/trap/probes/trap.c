/* The probe trap as the engine's entry trap (trace/trap.h): a uprobe at
 * every entry of the range (the mechanism: trap/probes/probes.h) stops a thread
 * running natively after the entry instruction; the thread waits for the
 * range, and when it gets it the instruction is emitted from the registers
 * the BPF program recorded.  The owner is stepped (or run translated) while
 * its pc is in the range; the others run on meanwhile and queue at the
 * entries.
 *
 * Ownership policy: a signal delivered to the owner inside the range runs
 * a handler that may return into the range's middle, where no probe is:
 * the owner keeps the range while it runs the handler (stepped, lines not
 * emitted) until it is back; a handler that runs longer than
 * GB_HANDLER_BUDGET steps (or leaves for good) gets a probe at the return
 * address instead.  A handler outside the range runs natively instead
 * (ehandler.c: the owner's hits count meanwhile), when it can. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/user.h>

#include "common/log.h"
#include "ptrace/regs.h"
#include "ptrace/tracee.h"
#include "trace/engine_int.h"
#include "trap/probes/probes.h"
#include "trap/traps.h"

/* Steps of a signal handler that interrupted the range after which its
 * owner runs natively, with a probe at the return address. */
#define GB_HANDLER_BUDGET 100000

struct probe_trap {
	struct gb_trap base;
	struct gb_trace_range *range;
	struct gb_probes *p;
	uint64_t entries;
};

struct probe_thread {
	bool has_hit;        /* waiting at an entry through a probe: the hit's
			      * instruction ran natively and is emitted when the
			      * thread gets the range */
	struct gb_probe_hit hit;
	bool fault_seen;     /* a synchronous fault signal stopped the thread
			      * natively at fault_pc (a probed instruction that
			      * faults raises it before the probe's stop) */
	uint64_t fault_pc;
	struct gb_stop fault;
	bool in_handler;     /* the owner runs a signal handler that interrupted
			      * the range: it stays owner (stepped, not emitted)
			      * until it is back at handler_ret */
	uint64_t handler_ret;
	uint32_t handler_steps;
};

#define PR(t) ((struct probe_trap *)(t))

static struct probe_thread *pth(struct gb_engine *e, size_t i) { return eng_trap_priv(e, i); }

static bool probes_native(const struct gb_trap *t) { return true; }

/* The range's run-time bounds, known or pending, as the probes know them. */
static void sync_range(struct probe_trap *pt)
{
	uint64_t s, en;
	if (gb_probes__range(pt->p, &s, &en))
		gb_trace_range_set(pt->range, s, en);
	else
		gb_trace_range_pend(pt->range);
}

static void probes_start(struct gb_trap *t, struct gb_engine *e)
{
	gb_icache__set_patch(e->ic, gb_probes__patch, PR(t)->p);
	sync_range(PR(t));
	eng_range_follow(e);
	/* Threads stopped inside the range (attach) own it in turn. */
	struct user_regs_struct r;
	for (size_t i = 0; i < e->t->nthreads; i++)
		if (eng_state(e, i) == T_STOPPED && gb_regs_get(eng_tid(e, i), &r) == 0 &&
		    eng_inside(e, r.rip))
			eng_th(e, i)->want_entry = true;
}

/* Thread i stopped after a probe's instruction: it waits for the range. */
static void took_hit(struct probe_trap *pt, struct gb_engine *e, size_t i,
		     const struct gb_probe_hit *hit)
{
	pth(e, i)->hit = *hit;
	pth(e, i)->has_hit = true;
	eng_th(e, i)->want_entry = true;
	sync_range(pt);
}

static enum gb_trap_verdict probes_classify(struct gb_trap *t, struct gb_engine *e, size_t i,
					    const struct gb_stop *st, enum gb_trap_where where,
					    uint64_t pc)
{
	struct probe_trap *pt = PR(t);
	struct gb_probe_hit hit;
	struct user_regs_struct r;
	if (st->kind != GB_STOP_SIGNAL || where == GB_AT_SYSCALL)
		return GB_TRAP_PROGRAM;
	/* Over a probed address uprobes end the step with a SIGTRAP of their
	 * own: it is the step's stop. */
	if (where == GB_AT_STEP && gb_probes__step_artifact(pt->p, st, pc))
		return GB_TRAP_STEP;
	if (gb_probes__claim(pt->p, st, &hit)) {
		/* Natively: the probed instruction ran, the thread stopped after
		 * it.  Never delivered.  (TAKEN: its hit was taken at an earlier
		 * stop.)  Elsewhere: a probe's signal from before it owned the
		 * range (its hit taken early): nothing ran. */
		if (where != GB_AT_NATIVE || (hit.flags & GB_PROBE_HIT_TAKEN))
			return GB_TRAP_SWALLOW;
		took_hit(pt, e, i, &hit);
		return GB_TRAP_ENTRY;
	}
	if (where != GB_AT_NATIVE)
		return GB_TRAP_PROGRAM;
	/* The program's own signal, dequeued before a probe's (lower numbers
	 * first): the hit is taken now, so that the handler runs after its
	 * instruction is in the trace. */
	if (!pth(e, i)->has_hit && gb_probes__take_early(pt->p, st, &hit))
		took_hit(pt, e, i, &hit);
	if (eng_sync_fault(st) && gb_regs_get(st->tid, &r) == 0) {
		pth(e, i)->fault_seen = true;
		pth(e, i)->fault_pc = r.rip;
		pth(e, i)->fault = *st;
	}
	return GB_TRAP_PROGRAM;
}

/* The owner in a handler left the range: a probe at the return address. */
static void leave_handler(struct probe_trap *pt, struct probe_thread *th)
{
	if (!th->in_handler)
		return;
	th->in_handler = false;
	gb_probes__add_entry(pt->p, th->handler_ret);
}

static bool probes_keep(struct gb_trap *t, struct gb_engine *e, size_t i, bool owner, uint64_t pc,
			bool in_range, bool inside)
{
	struct probe_thread *th = pth(e, i);
	if (!th->in_handler || !owner)
		return inside;
	if (pc == th->handler_ret || in_range)
		th->in_handler = false; /* back */
	else if (++th->handler_steps < GB_HANDLER_BUDGET)
		inside = true; /* still in the handler: keep the range */
	else
		leave_handler(PR(t), th);
	return inside;
}

static void probes_deliver(struct gb_trap *t, struct gb_engine *e, size_t i, uint64_t pc,
			   bool in_range, int sig)
{
	struct probe_thread *th = pth(e, i);
	if (!sig || !in_range || th->in_handler)
		return;
	th->in_handler = true;
	th->handler_ret = pc;
	th->handler_steps = 0;
}

/* The owner runs a handler natively (ehandler.c): its hits count. */
static bool probes_handler(struct gb_trap *t, struct gb_engine *e, size_t i, uint64_t ret)
{
	pth(e, i)->in_handler = false; /* (not stepped: no budget) */
	gb_probes__stepping(PR(t)->p, eng_tid(e, i), false);
	return true;
}

static void probes_handler_end(struct gb_trap *t, struct gb_engine *e, size_t i, bool back,
			       uint64_t ret)
{
	if (back)
		gb_probes__stepping(PR(t)->p, eng_tid(e, i), true);
	else if (!e->ended)
		gb_probes__add_entry(PR(t)->p, ret); /* its return is an entry */
}

static void probes_yield(struct gb_trap *t, struct gb_engine *e, size_t i)
{
	leave_handler(PR(t), pth(e, i)); /* it may block: the others go on */
}

/* An owner in a handler is stepped (its steps count for the budget). */
static bool probes_translate_ok(struct gb_trap *t, struct gb_engine *e, size_t i)
{
	return !pth(e, i)->in_handler;
}

static void probes_owner(struct gb_trap *t, struct gb_engine *e, size_t i, bool on)
{
	gb_probes__stepping(PR(t)->p, eng_tid(e, i), on);
}

/* The instruction a probe hit ran natively, emitted from the registers the
 * BPF program saw before it (thread i has just become the owner). */
static void emit_hit(struct gb_engine *e, size_t i)
{
	struct probe_thread *t = pth(e, i);
	struct gb_access acc[GB_MAX_ACCESSES];
	struct user_regs_struct now;
	int err = 0;
	if (!t->has_hit)
		return;
	t->has_hit = false;
	uint64_t pc = t->hit.addr;
	if (!eng_in_range(e, pc))
		return;
	pid_t tid = eng_tid(e, i);
	if (gb_regs_get(tid, &now)) {
		eng_set_state(e, i, T_DYING); /* killed meanwhile: its exit comes */
		return;
	}
	const struct gb_insn *insn = gb_icache__get(e->ic, tid, pc, &err);
	if (!insn) {
		if (err == -ESRCH) {
			eng_set_state(e, i, T_DYING);
			return;
		}
		gb_err("trace: thread %d: the entry at 0x%llx cannot be decoded: %s", tid,
		       (unsigned long long)pc, strerror(err ? -err : ESRCH));
		eng_finish(e, GB_END_ERROR);
		return;
	}
	int n = gb_probe_hit__accesses(&t->hit, &now, insn, acc, GB_MAX_ACCESSES);
	if (n < 0) {
		gb_err("trace: entry at 0x%llx: cannot compute its memory accesses: %s",
		       (unsigned long long)pc, strerror(-n));
		eng_finish(e, GB_END_ERROR);
		return;
	}
	/* A probed instruction that faulted: its signal came first (the
	 * handler has been set up since); it gets its exec line and the lines
	 * of the accesses it completed, as when stepped. */
	if (t->fault_seen && t->fault_pc == pc) {
		int done = eng_fault_done(pc, insn->len, acc, n, &t->fault, pc);
		if (done >= 0)
			n = done;
	}
	bool faulted = t->fault_seen && t->fault_pc == pc;
	t->fault_seen = false;
	if (e->vals) {
		/* --values: the entries give them once they ran (probes.h
		 * gb_probes_values_lost): the file before it is the hit's
		 * registers and the rest as it still is, its reads still in
		 * memory. */
		eng_vals_before(e, i, &t->hit.regs, acc, n);
		eng_vals_commit(e, i, pc, insn, acc, n, faulted ? ENG_VALS_FAULTED : ENG_VALS_DONE);
		return;
	}
	eng_commit(e, i, pc, acc, n);
}

static void probes_entered(struct gb_trap *t, struct gb_engine *e, size_t i)
{
	PR(t)->entries++;
	emit_hit(e, i);
}

/* A handler that interrupts the range (this thread was stopped inside it
 * after a probe) returns into its middle: an entry. */
static bool probes_resume(struct gb_trap *t, struct gb_engine *e, size_t i, int sig)
{
	struct user_regs_struct r;
	if (sig && gb_regs_get(eng_tid(e, i), &r) == 0 && eng_inside(e, r.rip) &&
	    gb_probes__add_entry(PR(t)->p, r.rip) == -ENOTSUP)
		eng_finish(e, GB_END_ERROR); /* (--values: said why) */
	return false; /* (natively) */
}

/* The probes stay on the file: the range is known again at the first hit
 * in the new image (if it maps the file at all).  The exec'ing thread
 * starts afresh (a handler it ran was the old image's); the threads the
 * exec killed are forgotten. */
static void probes_exec(struct gb_trap *t, struct gb_engine *e)
{
	for (size_t i = 0; i < e->t->nthreads; i++)
		if (eng_state(e, i) == T_GONE && eng_tid(e, i) != e->t->pid)
			gb_probes__forget(PR(t)->p, eng_tid(e, i));
		else if (eng_state(e, i) != T_GONE)
			memset(pth(e, i), 0, sizeof(struct probe_thread));
	int r = gb_probes__exec(PR(t)->p, e->exec_from);
	if (r) {
		gb_err("probe trap: pid %d exec'd from thread %d: cannot probe the new image: %s",
		       e->t->pid, e->exec_from, strerror(-r));
		eng_finish(e, GB_END_ERROR);
		return;
	}
	sync_range(PR(t));
}

static void probes_exit(struct gb_trap *t, struct gb_engine *e, size_t i)
{
	gb_probes__forget(PR(t)->p, eng_tid(e, i));
}

/* Probe hits of threads stopped at an entry after the end are not in the
 * trace (their instruction ran after it ended); no probe signal is left
 * for detach to deliver (they are claimed at their stops). */
static void probes_teardown(struct gb_trap *t, struct gb_engine *e)
{
	for (size_t i = 0; i < e->t->nthreads; i++) {
		eng_th(e, i)->want_entry = false;
		pth(e, i)->has_hit = false;
	}
	/* Every thread held: from now on a hit does nothing, so the uprobes
	 * can go after the detach (probes_free_later). */
	gb_probetrap__disarm(gb_probes__trap(PR(t)->p));
}

/* Their removal waits for the kernel's grace periods (tens of ms): an
 * attached program runs on meanwhile, its hits disarmed. */
static bool probes_free_later(const struct gb_trap *t) { return true; }

static uint64_t probes_entries(const struct gb_trap *t) { return PR(t)->entries; }

static void probes_free(struct gb_trap *t)
{
	gb_probes__free(PR(t)->p);
	free(t);
}

static const struct gb_trap_ops probes_ops = {
	.name = "probe",
	.thread_size = sizeof(struct probe_thread),
	.native = probes_native,
	.start = probes_start,
	.classify = probes_classify,
	.entered = probes_entered,
	.owner = probes_owner,
	.keep = probes_keep,
	.translate_ok = probes_translate_ok,
	.deliver = probes_deliver,
	.handler = probes_handler,
	.handler_end = probes_handler_end,
	.yield = probes_yield,
	.leave_native = true,
	.resume = probes_resume,
	.exec = probes_exec,
	.exit = probes_exit,
	.teardown = probes_teardown,
	.entries = probes_entries,
	.free_later = probes_free_later,
	.free = probes_free,
};

struct gb_trap *gb_trap_probes_new(struct gb_probes *p, struct gb_trace_range *r)
{
	struct probe_trap *pt = calloc(1, sizeof(*pt));
	if (!pt)
		return NULL;
	pt->base.ops = &probes_ops;
	pt->range = r;
	pt->p = p;
	return &pt->base;
}
