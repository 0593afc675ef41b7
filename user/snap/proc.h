/* What /proc says about a stopped process, for the snapshot: ids as the
 * process sees them (its innermost pid namespace), signal masks, fds, auxv,
 * exe, NT_PRPSINFO fields.  Text parsing only; no ptrace. */
#ifndef GB_SNAP_PROC_H
#define GB_SNAP_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "snap/snapshot.h"

struct gb_proc_status {
	char state;                 /* letter of "State:" */
	int32_t nspid, nspgid, nssid;   /* innermost level of NSpid/NSpgid/NSsid */
	int levels;                 /* number of NSpid levels */
	pid_t ppid;                 /* PPid as we see it */
	uint32_t uid, gid;
	uint64_t sigpnd, shdpnd, sigblk;
	uint64_t sigign, sigcgt;    /* process-wide: ignored, caught */
	int32_t umask;              /* "Umask:" (octal), -1 when the kernel lacks it */
	int seccomp;                /* "Seccomp:" 0 none, 1 strict, 2 filter */
};

/* /proc/PID/task/TID/status.  0 or -errno (-ESRCH when gone). */
int gb_proc_status(pid_t pid, pid_t tid, struct gb_proc_status *out);
/* Whole small /proc file into a malloc'd buffer (NUL-terminated). */
int gb_proc_slurp(pid_t pid, const char *name, uint8_t **buf, size_t *len);
/* exe, auxv, fds, psinfo (and meta.pid) of pid into s. */
int gb_proc_fill(pid_t pid, struct gb_snapshot *s);

#endif
