/* The copy-on-write copy of a stopped process: a clone injected into one of
 * its threads (through an existing `syscall` instruction, so no atfork
 * handler runs) that holds the memory as it was and never runs user code.
 *
 * clone(CLONE_PARENT, exit signal 0): the copy is a child of the target's
 * parent, not of the target, and its end sends no signal, so the program
 * sees neither a SIGCHLD nor a child to wait for.  It starts in a ptrace
 * stop (auto-attached through PTRACE_O_TRACECLONE) and gets
 * PTRACE_O_EXITKILL: if gebpf dies, so does the copy. */
#ifndef GB_SNAP_COW_H
#define GB_SNAP_COW_H

#include <stddef.h>
#include <sys/types.h>

#include "snap/snapshot.h"

struct gb_tracee;

/* Fork the copy.  0 with *child (a pid in our namespace), or -errno with
 * the reason in why (the process cannot fork: RLIMIT_NPROC, memory limits,
 * a seccomp filter, an init of a pid namespace). */
int gb_snap_cow_fork(struct gb_tracee *t, pid_t *child, char *why, size_t whylen);

/* Mark the maps of s the copy does not hold as they are (MAP_SHARED,
 * MADV_DONTFORK "dc", MADV_WIPEONFORK "wf" in /proc/PID/smaps): their
 * bytes must be read from the process while it is frozen.  Returns how
 * many, with freeze[i] set, or -errno. */
int gb_snap_cow_freeze_maps(pid_t pid, const struct gb_snapshot *s, bool *freeze);

#endif
