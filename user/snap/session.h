/* One `gebpf snap` job from start to end (docs/snap.md): check the output
 * path, launch or attach (from a worker process, common/guard.h, so that a
 * SIGKILL of gebpf leaves the target as it was), run to the point, freeze
 * with a copy-on-write copy, release the target, copy the bytes, sync. */
#ifndef GB_SNAP_SESSION_H
#define GB_SNAP_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/parse.h"

struct gb_snap_opts {
	pid_t pid;                      /* attach, or 0 */
	char **argv;                    /* launch, or NULL */
	const char *at;                 /* --at as given, or NULL */
	struct gb_range_spec at_spec;   /* --at: an address or [MODULE:]SYMBOL */
	uint64_t after;
	bool has_after;                 /* --after N */
	const char *out;                /* -o FILE, or NULL for the default name */
	bool aslr, pidns, fix_random, kill_after, no_fork, verbose;
};

/* Returns the process exit code (GB_EXIT_*); errors already printed. */
int gb_snap_session_run(const struct gb_snap_opts *o);

#endif
