/* The patch trap's state, shared by its two files: trap_patch.c (the
 * trap's hooks) and trap_patch_new.c (its set-up, which calls the former:
 * never the other way).  docs/trace.md "The patch trap". */
#ifndef GB_TRACE_TRAP_PATCH_H
#define GB_TRACE_TRAP_PATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jit/jit.h"
#include "jit/patch.h"
#include "trace/jitmap.h"
#include "trace/trap.h"

#define AREA_UNTRACED ((ssize_t)-2)

struct patch_trap {
	struct gb_trap base;
	struct gb_trace_range *range;
	pid_t pid;
	uint64_t start, end;          /* the range (run-time, inclusive) */
	uint8_t *code;                /* its original bytes (+ GB_INSN_MAX_LEN) */
	struct gb_jitmap map;
	struct gb_jit *j;
	struct gb_patch_plan plan;
	bool written;                 /* the patches are in the target */
	struct gb_jit_cursor cur;
	ssize_t area_of[GB_JIT_TLS_COUNT]; /* area k -> thread index (-1: none;
					     * AREA_UNTRACED: a vfork child's) */
	unsigned nareas;
	ssize_t cur_i;                /* the thread whose stretch the ring is at */
	uint64_t late;                /* records read before unwinding took them back */
	uint64_t handled;             /* signals taken at an original boundary */
	uint64_t marks;               /* stretch markers drained: entries (statistics) */
	uint64_t misses;              /* in-range lookup misses (stretches run natively) */
	unsigned npatched;
};

/* The instruction at pc, decoded from the range's original bytes. */
const struct gb_insn *patch_fetch(void *ctx, uint64_t pc);
/* The entry block of pc (translating it), or 0. */
uint64_t patch_entry_of(struct patch_trap *pt, uint64_t pc);
/* The end (trap_patch_end.c), once the original bytes are back and no
 * thread is in the cache: every stopped thread's gs base 0; the first
 * such thread's index (to unmap the cache through), or -1. */
struct gb_engine;
ssize_t patch_gs_zero(struct gb_engine *e);
extern const struct gb_trap_ops patch_ops;
void patch_free(struct gb_trap *t);

#endif
