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

/* Numeric fields of /proc/PID/stat in one read, into out[0..n] (n + 1
 * entries): out[i] = field i (1-based, as in proc(5)) for 4 <= i <= n;
 * out[0..3] = 0 (pid, comm and the state letter are not read).  0, -ESRCH,
 * -ENOENT (the kernel has fewer fields) or -errno. */
int gb_proc_stat_nums(pid_t pid, uint64_t *out, int n);

/* What /proc/PID/task/TID/status says of a thread: ids as the process sees
 * them (its innermost pid namespace), its state, signal masks. */
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

/* A whole /proc/PID/NAME file of any size into a malloc'd buffer
 * (NUL-terminated; *len without the NUL).  0, -ESRCH or -errno. */
int gb_proc_slurp(pid_t pid, const char *name, uint8_t **buf, size_t *len);

/* "pos:" and "flags:" (the open flags, octal in the file) of
 * /proc/PID/fdinfo/FD; a field the kernel does not show is left as it is.
 * 0, or -errno when the file cannot be read (fd closed meanwhile). */
int gb_proc_fdinfo(pid_t pid, int fd, uint64_t *pos, uint32_t *flags);

#endif
