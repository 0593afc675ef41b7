/* The traced range as the trace knows it now: the one copy that the engine,
 * the entry traps, the translating engine and the writer's summary read.
 * The session makes it; it moves only through the functions below (an exec
 * into a new image, a library mapped late, the probe trap learning where
 * its module is mapped), each of which tells the writer too. */
#ifndef GB_TRACE_RANGE_H
#define GB_TRACE_RANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct gb_jsonl;

/* Called after exec to re-resolve the range in the new image (and, for a
 * pending range, after each mmap); return 0 and set start and end,
 * -EAGAIN when the range's module is not mapped yet (pending: looked for
 * again after each mmap), other non-zero to keep the old one. */
typedef int (*gb_rerange_cb)(void *ctx, pid_t pid, uint64_t *start, uint64_t *end);

struct gb_trace_range {
	bool has_start, has_end;   /* in range: start <= pc <= end (open bounds allowed) */
	uint64_t start, end;
	bool pending;              /* its module is not mapped: nothing is in range */
	uint64_t gen;              /* changes with every change of the above */
	struct gb_jsonl *out;      /* the writer, whose summary names the range */
	gb_rerange_cb rerange;
	void *rerange_ctx;
};

static inline bool gb_trace_range_has(const struct gb_trace_range *r, uint64_t pc)
{
	return !r->pending && (!r->has_start || pc >= r->start) && (!r->has_end || pc <= r->end);
}

/* The range is [start, end] (known from now on). */
void gb_trace_range_set(struct gb_trace_range *r, uint64_t start, uint64_t end);
/* Its module is not mapped (any more): nothing is in range until set. */
void gb_trace_range_pend(struct gb_trace_range *r);
/* The process pid exec'd: the range resolved in the new image (0), its
 * module not mapped yet (-EAGAIN: pending), or kept as it was (other). */
int gb_trace_range_exec(struct gb_trace_range *r, pid_t pid);
/* A pending range, thread tid of pid at a syscall-exit stop: after an
 * mmap, is its module there now? */
void gb_trace_range_after_syscall(struct gb_trace_range *r, pid_t pid, pid_t tid);
/* The range [start, end] of pid in one file's code: its file, link-time
 * bounds and load bias; NULL, or why not (code on writable pages,
 * anonymous memory, several mappings). */
const char *gb_trace_range_file(pid_t pid, uint64_t start, uint64_t end, char *path, size_t len,
				uint64_t *lo, uint64_t *hi, uint64_t *bias);
/* Is every byte of [start, end] mapped executable in pid? */
bool gb_trace_range_mapped_exec(pid_t pid, uint64_t start, uint64_t end);
/* The mappings of pid overlapping [start, end] in one number (bounds,
 * offsets, inodes, permissions, paths), 0 when unreadable: the same number
 * before and after the attach means a range resolved before it holds. */
uint64_t gb_trace_range_maps_key(pid_t pid, uint64_t start, uint64_t end);
/* Before the attach (the target running): with entries, the entries of the
 * resolved range r's module scanned ahead (sym/entries.h's prefetch, when
 * r is one file's code); its maps' key. */
struct gb_range_spec;
uint64_t gb_trace_range_early(pid_t pid, const struct gb_range_spec *r, bool entries);

/* Is start, the first address of an address range (text: its spelling for
 * messages), an instruction boundary?  Where a sized function symbol covers
 * start, the function is decoded linearly from its first byte: 0 when an
 * instruction starts at start, else -EINVAL with one "gebpf: trace: range
 * TEXT: ... is inside the instruction at ..." line naming the nearest
 * boundaries.  Where none does (or its bytes do not decode), 0 and -v says
 * the boundary could not be checked.  Only reads the target. */
int gb_trace_range_check_start(pid_t pid, const char *text, uint64_t start);

#endif
