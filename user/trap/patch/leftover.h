/* What an earlier gebpf left in a target (docs/trace.md "What an earlier
 * gebpf left"): the patch trap's code caches and the jumps into them, when
 * gebpf and its worker were killed together (a cgroup's OOM kill, a
 * container stop) and nothing could undo them.  A trace that attaches
 * recognises them before it reads a byte of the program's code, writes the
 * program's own bytes back from its files, and takes over.
 *
 * A cache is recognised by its shape (an r-xs shared anonymous mapping of
 * GB_JIT_CODE_SIZE bytes followed by an rw-s one of GB_JIT_DATA_SIZE, one
 * object) and, made by this version, by its header (jit.h struct
 * gb_jit_hdr).  A patch is a `jmp rel32` into such a cache, on a page of a
 * file's code that is the process's own copy (/proc/PID/pagemap: not the
 * file's page), where the file holds other bytes.
 *
 * The caches themselves stay mapped (a signal handler in flight may return
 * into one): each is marked gone (its threads stop waiting for a gebpf that
 * is not there: jit/live.c) and its ring's memory is given back.
 */
#ifndef GB_TRAP_LEFTOVER_H
#define GB_TRAP_LEFTOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "jit/jit.h"

#define GB_LEFTOVER_MAX 32

struct gb_leftover {
	uint64_t code, data, end;       /* its code part, data part, the data part's end */
	bool known;                     /* with a header of this version (hdr) */
	struct gb_jit_hdr hdr;
	unsigned restored;              /* patched places written back (take) */
	unsigned inside;                /* threads running in it (not in a system call
					 * that returns to the original code) */
};

struct gb_leftovers {
	size_t n;
	struct gb_leftover v[GB_LEFTOVER_MAX];
};

/* The caches in pid (every thread stopped), with the threads inside each. */
int gb_leftovers_find(pid_t pid, struct gb_leftovers *out);
/* ... and taken over: each marked gone, its ring's memory given back, every
 * jump into one written back with its file's bytes; what was found said
 * under -v.  0, or -1 with one line said: a patched place that cannot be
 * written back (its file unreadable, the write refused). */
int gb_leftovers_take(pid_t pid, struct gb_leftovers *out);
/* The cache holding addr (its code or data part: a pc, a gs base), or NULL. */
const struct gb_leftover *gb_leftovers_at(const struct gb_leftovers *l, uint64_t addr);

#endif
