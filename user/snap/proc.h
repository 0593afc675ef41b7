/* What /proc says about a stopped process, for the snapshot: ids as the
 * process sees them (its innermost pid namespace), signal masks, fds, auxv,
 * exe, NT_PRPSINFO fields, read through ptrace/procfs.h; no ptrace. */
#ifndef GB_SNAP_PROC_H
#define GB_SNAP_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/procfs.h"
#include "snap/snapshot.h"

/* (gb_proc_status() and gb_proc_slurp(), which the snap room uses too, are
 * ptrace/procfs.h's.)  exe, auxv, fds, psinfo (and meta.pid) of pid into s. */
int gb_proc_fill(pid_t pid, struct gb_snapshot *s);

#endif
