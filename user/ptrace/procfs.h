/* Small readers of /proc/PID/{status,stat}: one place that parses them. */
#ifndef GB_PTRACE_PROCFS_H
#define GB_PTRACE_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The value of field NAME ("Tgid", "TracerPid", "SigPnd", ...) of
 * /proc/PID/status (pid 0: gebpf's own), without the name, colon and surrounding blanks.
 * 0, -ESRCH (no such process), -ENOENT (no such field) or -errno. */
int gb_proc_status_field(pid_t pid, const char *name, char *val, size_t len);
/* The same field as a number (decimal, or hexadecimal for the Sig* masks:
 * pass base 16).  0 or -errno as above. */
int gb_proc_status_num(pid_t pid, const char *name, int base, uint64_t *out);

/* Thread tid's seccomp mode ("Seccomp:" of /proc/TID/status: 0 none, 1
 * strict, 2 filter; 0 on a kernel without the field) and how many filters
 * it has ("Seccomp_filters:", kernel 5.9+; -1 when not shown).  The mode is
 * per thread and only ever grows (0 -> 1 or 0 -> 2).  0, -ESRCH or -errno. */
int gb_proc_seccomp(pid_t tid, int *mode, int *nfilters);

/* /proc/PID/stat: the state letter (R, S, D, T, t, Z, X...) and the flags
 * field (PF_*).  0, -ESRCH or -errno. */
int gb_proc_stat(pid_t pid, char *state, unsigned long *flags);

/* Numeric field n (1-based, as in proc(5): 47 is start_brk) of
 * /proc/PID/stat.  0, -ESRCH, -ENOENT (the kernel has no such field) or -errno. */
int gb_proc_stat_num(pid_t pid, int n, uint64_t *out);

/* The thread ids of pid's process, from /proc/PID/task: *tids (malloc'd,
 * *n of them, in directory order).  0, -ESRCH (no such process) or
 * -ENOMEM. */
int gb_proc_tasks(pid_t pid, pid_t **tids, size_t *n);

/* The task has exited (a zombie, dead, or gone from /proc): a wait for it
 * may never be answered (an exited group leader reports only after every
 * other thread of its process has been reaped). */
bool gb_proc_gone(pid_t pid);

#endif
