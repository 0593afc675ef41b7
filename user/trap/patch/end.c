/* The patch trap's end (every thread held), in an order that a SIGKILL of
 * the worker at any point cannot make harmful (docs/trace.md "Ending"):
 * see trap/patch/patch.h. */
#include <stdlib.h>
#include <sys/user.h>

#include "common/guard.h"
#include "common/log.h"
#include "jit/jit.h"
#include "ptrace/regs.h"
#include "trace/engine_int.h"
#include "trap/patch/patch.h"
#include "trap/probes/probes.h"

#define PT(t) ((struct patch_trap *)(t))

/* Thread i stays with the cache: it is in it, or a frame on its stack
 * returns to it (its gs base is the cache's way to its area). */
static bool with_cache(struct gb_engine *e, size_t i)
{
	struct patch_thread *p = eng_trap_priv(e, i);
	return p && (p->in_cache || p->cache_frame);
}

ssize_t patch_gs_zero(struct gb_engine *e)
{
	ssize_t via = -1;
	for (size_t i = 0; i < e->t->nthreads; i++) {
		struct user_regs_struct r;
		pid_t tid = eng_tid(e, i);
		if (with_cache(e, i)) {
			e->t->threads[i].keep_gs = true; /* (the detach's zero_gs too) */
			continue;
		}
		if (eng_state(e, i) != T_STOPPED || gb_regs_get(tid, &r))
			continue;
		r.gs_base = 0;
		if (gb_regs_set(tid, &r) == 0 && via < 0)
			via = (ssize_t)i;
	}
	return via;
}

/* gebpf's own view of it, after the teardown (or a set-up that failed). */
void patch_free(struct gb_trap *t)
{
	struct patch_trap *pt = (struct patch_trap *)t;
	gb_probes__free(pt->probes); /* (every uprobe gone) */
	gb_patch_plan_free(&pt->plan);
	gb_jit__free(pt->j);
	gb_jitmap_drop(&pt->map);
	patch_insns_free(pt);
	free(pt->code);
	if (pt->instead)
		gb_trap_free(pt->instead);
	free(pt);
}

/* The end, every thread held. */
void patch_teardown(struct gb_trap *t, struct gb_engine *e)
{
	struct patch_trap *pt = PT(t);
	patch_later_end(e);
	patch_probe_teardown(pt, e);
	/* From here on the cache does not wait for gebpf, whatever happens to
	 * the worker during the end (jit/live.c) */
	if (pt->j)
		gb_jit__live_end(pt->j);
	if (!pt->written)
		return;
	patch_drain(pt, e, false); /* (every thread stopped, but perhaps in a stretch) */
	gb_guard_test_point("end-begin");
	if (!eng_live(e)) {
		patch_drain(pt, e, true);
		patch_count_all(pt, e);
		pt->written = false;
		patch_report(pt);
		return;
	}
	/* In this order, so that a worker SIGKILLed at any point leaves a
	 * program that runs on correctly (docs/trace.md "Ending"): the bytes
	 * first (a thread left in the cache leaves it by its exits; none is
	 * ever at a pc inside a patch's bytes while they are written), then
	 * the threads out of the cache, then gs bases 0 (none enters it). */
	patch_write(pt, pt->pid, true);
	/* A thread left in the cache (or with a frame that returns to it), or
	 * one that could not be looked at, keeps the cache mapped: it leaves
	 * by the cache's exits as after a SIGKILL of the worker (an unmapped
	 * cache, its pc or its frame's in it, killed it: SIGSEGV). */
	size_t stay = 0;
	for (size_t i = 0; i < e->t->nthreads; i++) {
		struct user_regs_struct r;
		pid_t tid = eng_tid(e, i);
		struct patch_thread *p = eng_trap_priv(e, i);
		enum tstate s = eng_state(e, i);
		if (s == T_GONE || s == T_DYING)
			continue;
		if ((s != T_STOPPED && s != T_GROUP) || gb_regs_get(tid, &r)) {
			gb_warn("trace: thread %d: not stopped for the end (state %d): the code "
				"cache and its gs base stay", tid, (int)s);
			if (p)
				p->in_cache = true; /* (perhaps: its pc is not known) */
			stay++;
			continue;
		}
		if (gb_jit__in_code(pt->j, r.rip) && patch_unwind(pt, e, i, &r, NULL)) {
			gb_err("trace: thread %d: cannot leave the code cache at 0x%llx", tid,
			       (unsigned long long)r.rip);
			if (p)
				p->in_cache = true;
		}
		if (with_cache(e, i))
			stay++;
	}
	gb_guard_test_point("end-unwound");
	/* What the end stepped through is the trace's too, up to --max-insns
	 * (no thread in the cache now). */
	patch_drain(pt, e, true);
	patch_count_all(pt, e); /* (the threads unwound out of twins: counts taken back) */
	ssize_t via = patch_gs_zero(e);
	gb_guard_test_point("end-gs0");
	e->t->zero_gs = true; /* (and a thread made since, at the detach) */
	pt->written = false;
	patch_report(pt);
	if (pt->late)
		gb_warn("trace: the patch trap: %llu records were read before they were taken back "
			"(a thread stopped in the cache): the trace is not exact there",
			(unsigned long long)pt->late);
	if (stay)
		gb_warn("pid %d: the code cache at 0x%llx stays mapped: %zu thread%s may still run "
			"in it", pt->pid, (unsigned long long)pt->map.addr, stay, stay == 1 ? "" : "s");
	else if (via < 0 || gb_jitmap_unmap_safe(pt->pid, eng_tid(e, (size_t)via), pt->map.addr,
						&e->t->threads[via].pending_sig))
		gb_warn("pid %d: the code cache at 0x%llx stays mapped (never entered again)", pt->pid,
			(unsigned long long)pt->map.addr);
	gb_guard_test_point("end-unmapped");
}
