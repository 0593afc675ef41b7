/* The copy-on-write copy of a stopped process: a clone made by one of its
 * threads from a stub (clonestub.h: no libc, so no atfork handler runs)
 * that holds the memory as it was and never runs the program's code.
 *
 * clone(CLONE_PARENT, exit signal 0): the copy is a child of the target's
 * parent, not of the target, and its end sends no signal, so the program
 * sees neither a SIGCHLD nor a child to wait for.  It starts in a ptrace
 * stop (auto-attached through PTRACE_O_TRACECLONE) and gets
 * PTRACE_O_EXITKILL: if gebpf dies, so does the copy (and if gebpf dies
 * before that, the stub makes it exit). */
#ifndef GB_SNAP_COW_H
#define GB_SNAP_COW_H

#include <stddef.h>
#include <sys/types.h>

#include "snap/snapshot.h"

struct gb_tracee;

/* Fork the copy.  0 with *child (a pid in our namespace), or -errno with
 * the reason said by gb_snap_cow_none (the process cannot fork:
 * RLIMIT_NPROC, memory limits, a seccomp filter, an init of a pid
 * namespace). */
int gb_snap_cow_fork(struct gb_tracee *t, pid_t *child);
/* There will be no copy because of <fmt>: one warning line (the capture
 * goes on with the process stopped), none for -ESRCH (the process is gone:
 * the caller says so).  Returns e. */
int gb_snap_cow_none(pid_t pid, int e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Which VMAs have MADV_DONTFORK ("dc") or MADV_WIPEONFORK ("wf") set, from
 * /proc/PID/smaps.  Reading smaps walks every page table of the process
 * (tens of ms for a GiB): read it before the process is stopped. */
struct gb_snap_cow_plan;
struct gb_snap_cow_plan *gb_snap_cow_plan__read(pid_t pid);   /* NULL: cannot */
void gb_snap_cow_plan__free(struct gb_snap_cow_plan *p);

/* Mark (freeze[i]) the maps of s with bytes that the copy will not hold as
 * they are now: MAP_SHARED ones, those plan says are dc or wf (a VMA is
 * known by its start), and, as they may have become wf since plan was read,
 * private anonymous maps plan does not know.  (A madvise(MADV_WIPEONFORK)
 * on a known VMA between the plan and the freeze is missed: its bytes would
 * read as zeros.)  plan NULL: smaps is read now.  Returns how many, or
 * -errno. */
int gb_snap_cow_freeze_maps(pid_t pid, const struct gb_snapshot *s, const struct gb_snap_cow_plan *plan,
			    bool *freeze);
/* After the fork: also mark the maps the copy lacks (dc set meanwhile). */
int gb_snap_cow_missing_maps(pid_t child, const struct gb_snapshot *s, bool *freeze);

#endif
