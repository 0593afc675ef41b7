/* Where a launched program runs for a deterministic snapshot: gebpf (and so
 * the program) pinned to the lowest CPU it may use (the kernel writes the
 * CPU number into glibc's rseq area), and, optionally, a new pid namespace
 * whose init (pid 1) just waits, so that the program is pid 2 every time. */
#ifndef GB_SNAP_LAUNCH_H
#define GB_SNAP_LAUNCH_H

#include <stdbool.h>
#include <sys/types.h>

/* Set up before launching.  Returns the namespace's init (0: none; a
 * warning says why when pidns was asked for). */
pid_t gb_snap_launch_env(bool pidns);
/* Kill and reap the namespace's init (0: nothing). */
void gb_snap_launch_env_end(pid_t init);

#endif
