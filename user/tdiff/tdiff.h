/* gebpf diff of two traces (docs/diff.md): both streamed as instruction
 * groups (group.h), addresses rebased per region (regions.h), every
 * divergence reported after resynchronising (align.h), each explained with
 * symbol+offset, disassembly and, where its shape is an emulator quirk's, a
 * hint (hints.h); a summary table at the end (report.h). */
#ifndef GB_TDIFF_TDIFF_H
#define GB_TDIFF_TDIFF_H

#include <stdbool.h>
#include <stdio.h>

#include "tdiff/norm.h"

struct gb_treader;

struct gb_tdiff_opts {
	bool ignore_vt, ignore_vcpu;
	bool no_rebase;
	bool json;
	enum gb_norm norm;
	int context;              /* records of A shown before a divergence */
	long max_diffs;           /* divergences shown in detail (all are counted) */
	long window;              /* groups looked ahead to resynchronise */
	int sync;                 /* groups that must agree to resynchronise */
	unsigned long long region_gap; /* bytes that cut a region (0: GB_REGION_GAP) */
	const char *binary;       /* symbols and bytes, or NULL (meta.json's) */
	const char *maps[2];      /* /proc/PID/maps files of A and B, or NULL */
	unsigned ignore_values;   /* --ignore-values: 1 << enum gb_vkind (values.h) */
};

/* 0 equal, 1 different, -errno when an input cannot be read (printed).
 * a and b are open readers of the two traces (JSONL or zstd), opened with
 * GB_TREADER_REWIND when rebasing (two passes). */
int gb_tdiff(struct gb_treader *a, struct gb_treader *b, const struct gb_tdiff_opts *o, FILE *out);

#endif
