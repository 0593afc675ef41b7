/* Address regions of one trace, found from the trace itself (docs/diff.md
 * "Rebasing"): the distinct addresses it touches (pcs and data addresses)
 * sorted, cut wherever two consecutive ones are more than a gap apart.
 * Each region is anchored at its first touched address in trace order and
 * numbered in order of first touch, so that region i of trace A is matched
 * with region i of trace B and an address compares as (i, addr - anchor).
 *
 * Built online (an address joins, extends or bridges the regions it lies
 * within the gap of), so memory is one entry per region, whatever the
 * trace's length. */
#ifndef GB_TDIFF_REGIONS_H
#define GB_TDIFF_REGIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 1 MiB: docs/diff.md "Rebasing" says why. */
#define GB_REGION_GAP (1ull << 20)

struct gb_region {
	uint64_t lo, hi;       /* lowest and highest address touched */
	uint64_t anchor;       /* first address touched */
	uint64_t first;        /* order of that touch */
	uint32_t index;        /* in order of first touch (after _finish) */
	char name[64];         /* from a maps file: "[stack]", "prog", or "" */
};

struct gb_regions {
	struct gb_region *v;   /* sorted by lo */
	size_t n, cap;
	uint64_t gap, touches;
	size_t last;           /* the region last touched (a cache) */
	bool finished;
};

void gb_regions_init(struct gb_regions *rs, uint64_t gap);
/* The next touch of addr in trace order.  0 or -ENOMEM (printed). */
int gb_regions_touch(struct gb_regions *rs, uint64_t addr);
/* Number the regions in order of first touch. */
void gb_regions_finish(struct gb_regions *rs);
/* The region holding addr (after _finish), or NULL (an address never
 * touched while building). */
const struct gb_region *gb_regions_find(const struct gb_regions *rs, uint64_t addr);
/* The region with index i, or NULL. */
const struct gb_region *gb_regions_by_index(const struct gb_regions *rs, uint32_t i);
/* Name the regions from /proc/PID/maps text: the mapping that holds each
 * anchor ("[stack]", "[heap]", a file's base name). */
void gb_regions_name(struct gb_regions *rs, const char *maps);
void gb_regions_free(struct gb_regions *rs);

#endif
