/* Exact points for a snapshot (ptrace side): --after N single-steps one
 * thread; --at uses gb_run_to (ptrace/runto.h).  And the deterministic
 * launch's fixed AT_RANDOM bytes. */
#ifndef GB_SNAP_POINT_H
#define GB_SNAP_POINT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/tracee.h"

/* The deterministic launch's replacement for the kernel's randomness:
 * AT_RANDOM bytes and getrandom(2) results come from this fixed stream. */
struct gb_snap_rng {
	uint64_t x;
};
void gb_snap_rng_init(struct gb_snap_rng *r);
void gb_snap_rng_fill(struct gb_snap_rng *r, uint8_t *buf, size_t len);

/* Run thread tid natively to addr like gb_run_to (int3 planted and
 * removed), stopping at each of its syscalls so that the results of
 * getrandom(2) are replaced from rng.  Same return values as gb_run_to. */
int gb_snap_run_to_det(struct gb_tracee *t, pid_t tid, uint64_t addr, struct gb_snap_rng *rng);

/* Single-step thread tid (ptrace/step.h) until n instructions of the
 * program have run (signals it gets are delivered; entering a handler is
 * not an instruction), replacing getrandom(2) results from rng (NULL: keep
 * them).  *done counts them.  0, -ESRCH (exited first; t->exited), -EINTR
 * (Ctrl-C, seen between two steps), or -errno. */
int gb_snap_step_det(struct gb_tracee *t, pid_t tid, uint64_t n, uint64_t *done,
		     struct gb_snap_rng *rng);
/* Add every thread of t's process that t does not know yet (auto-attached
 * clones), waiting for its first stop. */
int gb_snap_collect_threads(struct gb_tracee *t);
/* Overwrite the 16 bytes AT_RANDOM points at from rng (right after exec). */
int gb_snap_fix_random(pid_t pid, struct gb_snap_rng *rng);

#endif
