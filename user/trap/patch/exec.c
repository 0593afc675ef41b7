/* The patch trap across exec, and for a range whose module is mapped
 * later (docs/trace.md "The patch trap", "fork, exec, threads").
 *
 * At the exec event the old image's patches and cache are gone with it:
 * the ring is drained to its end (its records are the old image's last
 * stretches, read through gebpf's own view of the cache), the misses
 * counted, then nothing of the old cache is kept (translations, plan,
 * areas and the threads' marks of them, the ring cursor).  The range is
 * resolved again in the new image (the session's rerange: a symbol is
 * looked up in the new program) and the trap is set up there before the
 * thread runs (before_run: a new cache near the new range, its patches, an
 * area for the thread), as at the start.  A range whose module is not
 * mapped yet (a library the new image's loader maps, or one the program
 * dlopens later) is looked for after each mmap, the threads running with
 * PTRACE_SYSCALL meanwhile, and set up once its code is mapped
 * executable.  Where the patch trap does not apply to the new range, the
 * probe trap traces it instead (else the page trap, else stepping), said
 * in one line: the engine is given that trap for the rest of the trace. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/user.h>

#include "common/guard.h"
#include "common/log.h"
#include "trace/engine_int.h"
#include "trace/range.h"
#include "trap/patch/patch.h"
#include "trap/probes/probes.h"
#include "trap/traps.h"

#define PT(t) ((struct patch_trap *)(t))

static void flush(struct patch_trap *pt, struct gb_engine *e)
{
	patch_drain(pt, e, true); /* (an exec: no other thread) */
	patch_collect_misses(pt, true);
	patch_count_all(pt, e);
	gb_guard_undo_clear(); /* the old image's bytes went with it */
}

/* Nothing of the old image's cache is kept: its records drained first. */
static void drop_image(struct patch_trap *pt, struct gb_engine *e)
{
	if (pt->j)
		flush(pt, e);
	patch_unbuild(pt);
	for (size_t i = 0; i < e->t->nthreads; i++)
		memset(eng_trap_priv(e, i), 0, sizeof(struct patch_thread)); /* areas, skips, watches */
}

void patch_exec(struct gb_trap *t, struct gb_engine *e)
{
	struct patch_trap *pt = PT(t);
	drop_image(pt, e);
	pt->due = pt->waiting = false;
	int r = gb_trace_range_exec(pt->range, e->t->pid);
	if (r == -EAGAIN) {
		pt->waiting = true;
		gb_info("trace: pid %d exec'd: the range's module is not mapped yet; the patch trap "
			"looks for it after each mmap", e->t->pid);
		return;
	}
	/* (r != 0: the range kept as it was, said by rerange) */
	pt->due = !pt->range->pending;
}

void patch_pending_exit(struct patch_trap *pt, struct gb_engine *e, size_t i)
{
	if (!pt->waiting)
		return;
	gb_trace_range_after_syscall(pt->range, e->t->pid, eng_tid(e, i));
	if (pt->range->pending ||
	    !gb_trace_range_mapped_exec(e->t->pid, pt->range->start, pt->range->end))
		return; /* (its text mapped over the file's first mapping next) */
	pt->waiting = false;
	pt->due = true;
}

/* Where the patch trap does not apply: the probe trap over the range's
 * file, else the page trap, else none. */
static struct gb_trap *instead(struct patch_trap *pt, struct gb_engine *e, const char *path,
			       uint64_t lo, uint64_t hi, uint64_t bias)
{
	struct gb_trap *t = NULL;
	if (path) {
		struct gb_probes_opts po = { .tgid = e->t->pid, .path = path, .lo = lo, .hi = hi,
					     .bias = bias, .mapped = true };
		struct gb_probes *p = gb_probes__new(&po);
		t = p ? gb_trap_probes_new(p, pt->range) : NULL;
		if (p && !t)
			gb_probes__free(p);
	}
	if (!t)
		t = gb_trap_pages_new(e->t->pid, pt->range);
	if (!t)
		t = gb_trap_none_new(pt->range);
	return t;
}

/* The new image's range known, every thread stopped: the trap set up, or
 * another one given to the engine. */
static void set_up(struct patch_trap *pt, struct gb_engine *e)
{
	char path[4096], buf[200];
	uint64_t lo = 0, hi = 0, bias = 0;
	const struct gb_trace_range *rg = pt->range;
	const char *why = gb_trace_range_file(e->t->pid, rg->start, rg->end, path, sizeof(path), &lo,
					      &hi, &bias);
	bool in_file = !why;
	gb_log_demote_warnings(pt->quiet);
	if (!why)
		why = patch_build(pt, e->t, path, lo, hi, bias, buf, sizeof(buf));
	if (!why) {
		gb_log_demote_warnings(false);
		patch_start(&pt->base, e);
		return;
	}
	pt->instead = instead(pt, e, in_file ? path : NULL, lo, hi, bias);
	gb_log_demote_warnings(false);
	if (!pt->instead) {
		gb_err("trace: pid %d: cannot set up the trace of the new image: %s", e->t->pid,
		       strerror(ENOMEM));
		eng_finish(e, GB_END_ERROR);
		return;
	}
	(pt->quiet ? gb_info : gb_warn)("range 0x%llx-0x%llx: the patch trap does not apply%s%s%s: "
					"using the %s trap",
		(unsigned long long)rg->start, (unsigned long long)rg->end, *why ? " (" : "", why,
		*why ? ")" : "", gb_trap_name(pt->instead));
	if (pt->images)
		patch_report(pt); /* (what it traced of the earlier images) */
	eng_switch_trap(e, pt->instead);
}

void patch_before_run(struct gb_trap *t, struct gb_engine *e)
{
	struct patch_trap *pt = PT(t);
	if (!pt->due)
		return;
	pt->due = false;
	enum tstate *was = calloc(e->t->nthreads + 1, sizeof(*was));
	if (!was) {
		pt->due = true;
		return;
	}
	eng_stop_world(e, was); /* (one thread after an exec; a dlopen: maybe more) */
	set_up(pt, e);
	if (pt->instead && pt->instead->ops->before_run)
		pt->instead->ops->before_run(pt->instead, e); /* (it arms its trap now) */
	eng_resume_world(e, was);
	free(was);
}
