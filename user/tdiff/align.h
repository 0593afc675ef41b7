/* Both traces side by side: a bounded window of groups per side, the
 * comparison of groups with rebased addresses, and the resynchronisation
 * after a divergence (docs/diff.md "Divergences"): look ahead up to a
 * window of groups in both traces for the nearest point (fewest groups
 * skipped on both sides together) where the next K groups agree, or where
 * both traces end. */
#ifndef GB_TDIFF_ALIGN_H
#define GB_TDIFF_ALIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tdiff/group.h"
#include "tdiff/regions.h"

struct gb_cmp_opts {
	bool ignore_vcpu, rebase;
};

/* One side: its group stream, its regions and its window. */
struct gb_tside {
	struct gb_tgroups *gs;
	const struct gb_regions *rs;    /* NULL: raw addresses */
	struct gb_tgroup *ring;
	uint64_t *hash;
	size_t cap, head, count;
	bool eof;
	struct gb_tgroup prev;          /* the last group taken off (a copy) */
	bool has_prev;
	uint64_t groups, records, per_type[GB_TL_NTYPES];
};

/* A rebased address: region index + 1 (0: not in a region, or rebasing
 * off) and the offset from the region's anchor. */
struct gb_raddr {
	uint32_t region;
	int64_t off;
};

struct gb_raddr gb_rebase(const struct gb_regions *rs, uint64_t addr);

int gb_tside_init(struct gb_tside *s, struct gb_tgroups *gs, const struct gb_regions *rs, size_t cap);
void gb_tside_free(struct gb_tside *s);
/* Buffer up to n groups (fewer at the end).  0 or -errno. */
int gb_tside_fill(struct gb_tside *s, size_t n, const struct gb_cmp_opts *o);
struct gb_tgroup *gb_tside_at(struct gb_tside *s, size_t i);
uint64_t gb_tside_hash(const struct gb_tside *s, size_t i);
/* Take n groups off the front (the last one is kept as prev). */
void gb_tside_pop(struct gb_tside *s, size_t n);

/* The two records compare equal (vt aside), rebased on their sides. */
bool gb_rec_equal(const struct gb_trec *x, const struct gb_regions *ra, const struct gb_trec *y,
		  const struct gb_regions *rb, const struct gb_cmp_opts *o);
bool gb_group_equal(const struct gb_tgroup *x, const struct gb_regions *ra, const struct gb_tgroup *y,
		    const struct gb_regions *rb, const struct gb_cmp_opts *o);

/* After a - b: the nearest (*da, *db) (not 0,0) within window groups of
 * each front where sync groups agree or both traces end.  true when found. */
bool gb_resync(struct gb_tside *a, struct gb_tside *b, size_t window, size_t sync,
	       const struct gb_cmp_opts *o, size_t *da, size_t *db);

#endif
