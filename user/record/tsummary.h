/* gebpf show TRACE: what a trace holds, in one read (docs/show.md): lines
 * per type, vcpus, the pc span, its summary line, and how it is stored
 * (zstd frames), and with --values what the values say. */
#ifndef GB_RECORD_TSUMMARY_H
#define GB_RECORD_TSUMMARY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "record/tline.h"
#include "record/treader.h"

struct gb_tsummary {
	enum gb_tformat fmt;
	uint64_t lines, per_type[GB_TL_NTYPES];
	uint64_t pc_lo, pc_hi;
	bool has_pc;
	int64_t *vcpus;            /* sorted, distinct */
	size_t nvcpus, vcpus_cap;
	char *summary;             /* the last summary line, or NULL */
	/* --values (docs/trace-format.md "Values"): exec lines with a "regs"
	 * object, accesses with a "val", and each register's writes. */
	uint64_t exec_regs, acc_vals;
	struct { char name[8]; uint64_t n; } *wregs;
	size_t nwregs, wregs_cap;
	struct gb_treader_stats st;
};

/* Read rd to its end.  0, or -errno (printed, naming the file and line). */
int gb_tsummary_read(struct gb_treader *rd, struct gb_tsummary *s);
void gb_tsummary_print(const struct gb_tsummary *s, const char *name, bool json, FILE *out);
void gb_tsummary_free(struct gb_tsummary *s);

#endif
