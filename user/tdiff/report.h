/* What gebpf diff prints about two traces (docs/diff.md "Output"): each
 * divergence in detail (up to --max-diffs; every one is counted), then the
 * summary table a user reads first, or one JSON document (--json). */
#ifndef GB_TDIFF_REPORT_H
#define GB_TDIFF_REPORT_H

#include <stdio.h>

#include "tdiff/align.h"
#include "tdiff/hints.h"
#include "tdiff/norm.h"

struct gb_tbin;

enum gb_dkind {
	GB_D_ACCESS,          /* same instruction, accesses differ (addr/size/type) */
	GB_D_ACCESS_MISSING,  /* same instruction, B lacks accesses A has */
	GB_D_ACCESS_EXTRA,    /* same instruction, B has accesses A lacks */
	GB_D_INSN_MISSING,    /* A has instructions B lacks */
	GB_D_INSN_EXTRA,      /* B has instructions A lacks */
	GB_D_FLOW,            /* different pcs */
	GB_D_VT,              /* same records, vt moved */
	GB_D_LINE,            /* vcpu, err, a summary or another line differs */
	GB_D_VALUE,           /* same records, values differ (--values: values.h) */
	GB_D_N
};

const char *gb_dkind_name(enum gb_dkind k);

struct gb_treport_opts {
	const char *name_a, *name_b;
	bool json, ignore_vt, ignore_vcpu;
	int context;
	long max_diffs;
	enum gb_norm norm;
	const struct gb_cmp_opts *cmp;
	const struct gb_tbin *bin;
	const char *note;                /* how addresses were compared */
	const struct gb_regions *ra, *rb;   /* listed in the header, or NULL */
	unsigned ignore_values;          /* 1 << enum gb_vkind: left out, counted */
};

/* A divergence: na groups at the front of a's window against nb at b's. */
struct gb_div {
	enum gb_dkind kind;
	struct gb_tside *a, *b;
	size_t na, nb;
	size_t rec;            /* the first differing record inside the first pair */
	bool no_resync;        /* no agreement within the window: the span is the window */
	uint64_t more_a, more_b;   /* groups past the window (an end drained) */
};

struct gb_treport;

struct gb_treport *gb_treport__new(const struct gb_treport_opts *o, FILE *out);
/* A group of A that matched: the context of the next divergence. */
void gb_treport__seen(struct gb_treport *r, const struct gb_tgroup *g);
void gb_treport__divergence(struct gb_treport *r, const struct gb_div *d);
/* Groups x (A) and y (B) matched: their values compared (--values), a
 * divergence reported when they differ. */
void gb_treport__values(struct gb_treport *r, const struct gb_tgroup *x, const struct gb_tgroup *y);
/* The summary table (or the JSON document).  Returns the number of
 * divergences. */
unsigned long gb_treport__finish(struct gb_treport *r, const struct gb_tside *a, const struct gb_tside *b,
				 const struct gb_norm_counts nc[2]);
void gb_treport__free(struct gb_treport *r);

#endif
