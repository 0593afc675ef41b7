/* The trace session's choice of entry trap: see session_int.h. */
#include "session/session_int.h"

#include "common/log.h"

static const char *range_file(struct session *s, char *path, size_t len, uint64_t *lo,
			      uint64_t *hi, uint64_t *bias)
{
	return gb_trace_range_file(s->t.pid, s->range.start, s->range.end, path, len, lo, hi, bias);
}

/* The probe trap for the range, or NULL (with the reason said when it
 * was asked for) when the page trap must do: the range must lie in one
 * file's code. */
static struct gb_probes *setup_probes(struct session *s)
{
	struct gb_probes_opts po = { .tgid = s->t.pid, .quiet = false, .values = s->o->values };
	char path[4096];
	if (s->range_pending) {
		po.path = s->pending_path;
		po.lo = s->pending_lo;
		po.hi = s->pending_hi;
		return gb_probes__new(&po);
	}
	const char *why = range_file(s, path, sizeof(path), &po.lo, &po.hi, &po.bias);
	if (why) {
		gb_info("range %s: %s: page trap", s->range_text, why);
		return NULL;
	}
	po.path = path;
	po.mapped = true;
	return gb_probes__new(&po);
}

/* The probe trap for the range (s->trap GB_TRAP_PROBES or GB_TRAP_AUTO),
 * else the page trap. */
static int probes_or_pages(struct session *s)
{
	s->probes = setup_probes(s);
	if (s->probes) {
		s->trap = GB_TRAP_PROBES;
		return 0;
	}
	if (s->range_pending) {
		gb_err("range %s: a module that is not mapped yet needs the probe trap (or "
		       "--trap none)", s->range_text);
		return -1;
	}
	if (s->trap == GB_TRAP_PROBES)
		gb_warn("range %s: the probe trap cannot be used; using the page trap", s->range_text);
	s->trap = GB_TRAP_PAGES;
	return 0;
}

/* Whether the patch trap may apply (the rest is checked with the trap made,
 * gb_trap_patch_new); else the probe trap, said in one line: a warning when
 * --trap patch asked for it, under -v when it was only the default's first
 * choice (the default then goes on as without it). */
static void check_patch(struct session *s)
{
	const struct gb_trace_opts *o = s->o;
	const char *why = NULL;
	if (o->engine == GB_ENGINE_STEP)
		why = "it runs the range translated, --engine step single-steps it";
	else if (o->values)
		why = "its code cache takes no values yet";
	else if (o->nsnap_pcs || o->nsnap_vts)
		why = "--snap-at stops at an instruction";
	else if (o->faults)
		why = "--faults merges faults with stepped instructions";
	else if (s->range_pending)
		why = NULL; /* set up once it is (trap/patch/exec.c) */
	else
		why = range_file(s, s->file_path, sizeof(s->file_path), &s->file_lo, &s->file_hi,
				 &s->file_bias);
	if (!why) {
		s->trap = GB_TRAP_PATCH;
		return;
	}
	(o->trap == GB_TRAP_PATCH ? gb_warn : gb_info)("range %s: the patch trap does not apply "
						       "(%s): using the %s", s->range_text, why,
						       o->trap == GB_TRAP_PATCH ? "probe trap"
						       : "probe trap (else the page trap)");
	s->trap = o->trap == GB_TRAP_PATCH ? GB_TRAP_PROBES : GB_TRAP_AUTO;
}

/* The patch trap refused after all (said why): the probe trap for --trap
 * patch, the default's next choice (probes, else pages) for the default. */
int gb_session__patch_refused(struct session *s)
{
	s->trap = s->o->trap == GB_TRAP_PATCH ? GB_TRAP_PROBES : GB_TRAP_AUTO;
	return probes_or_pages(s);
}

/* Which trap stops threads at the range's entry (docs/trace.md "Entry
 * traps"): by default the patch trap where it applies, else the probe trap
 * where the range is code of a file, else the page trap (unless --trap says
 * otherwise); none without a bounded range. */
int gb_session__choose_trap(struct session *s)
{
	const struct gb_trace_opts *o = s->o;
	bool bounded = s->range.has_start && s->range.has_end;
	s->trap = o->trap;
	if (s->trap == GB_TRAP_NONE || !bounded) {
		/* A pending range is looked for after each mmap (engine). */
		s->trap = GB_TRAP_NONE;
		return 0;
	}
	/* --snap-at vt=N must stop before instruction N; a probe reports an
	 * entry instruction after it ran.  (--values takes the probe trap
	 * where every entry can give its values once it ran, probes.h.) */
	if (s->trap == GB_TRAP_AUTO && o->nsnap_vts)
		s->trap = GB_TRAP_PAGES;
	if (s->trap == GB_TRAP_PATCH || s->trap == GB_TRAP_AUTO)
		check_patch(s);
	if (s->trap == GB_TRAP_PATCH)
		return 0;
	if (s->trap == GB_TRAP_AUTO || s->trap == GB_TRAP_PROBES)
		return probes_or_pages(s);
	s->trap = GB_TRAP_PAGES;
	return 0;
}

