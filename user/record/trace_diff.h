/* gebpf diff of two JSONL traces (trace_diff.c), in the trace format this
 * room writes (docs/trace-format.md); the options are docs/diff.md's. */
#ifndef GB_RECORD_TRACE_DIFF_H
#define GB_RECORD_TRACE_DIFF_H

#include <stdbool.h>
#include <stdio.h>

enum gb_norm { GB_NORM_NONE = 0, GB_NORM_QEMU, GB_NORM_LACKEY };

struct gb_trace_diff_opts {
	bool ignore_vt, ignore_vcpu;
	enum gb_norm norm;       /* emulator quirks to undo (docs/diff.md) */
	int context;             /* lines of context before the first difference */
};

/* 0 equal, 1 different, -errno on a read/parse error (one "gebpf: FILE...:
 * <why>" line printed). */
int gb_trace_diff(const char *pa, const char *pb, const struct gb_trace_diff_opts *o, FILE *out);

#endif
