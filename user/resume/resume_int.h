/* Inside the resume room: system calls run in the helper process being
 * turned into the snapshot's process, with a scratch area of its memory
 * for the calls' arguments (paths, auxv). */
#ifndef GB_RESUME_INT_H
#define GB_RESUME_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/tracee.h"
#include "resume/resume.h"
#include "snap/snapshot.h"

#define GB_RSCRATCH_LEN (16 * 1024ull)

struct gb_rctx {
	pid_t pid;
	uint64_t insn;          /* a syscall instruction of the tracee (its vDSO) */
	uint64_t scratch;       /* GB_RSCRATCH_LEN bytes of the tracee, or 0 */
	const char *what;       /* the context of failure messages */
	const struct gb_snapshot *snap;
	bool ns;                /* --new-pidns: the process's own ids are the snapshot's
				 * (the ids it passes to the kernel), gebpf's are t's */
	const struct gb_fd_choice *choice;   /* --fd */
	size_t nchoice;
};

/* The user's choice for fd (--fd), or NULL. */
const struct gb_fd_choice *gb_resume__choice(const struct gb_rctx *c, int fd);

/* One "gebpf: WHAT: <fmt>" line; returns e (-EIO when e is not negative). */
int gb_resume__fail(struct gb_rctx *c, int e, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Run syscall nr in the tracee: its return value (-errno on failure; an
 * injection that failed also gives -errno). */
long gb_rsys(struct gb_rctx *c, long nr, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
	     uint64_t a4, uint64_t a5);
/* The same in thread tid of the tracee. */
long gb_rsys_in(struct gb_rctx *c, pid_t tid, long nr, uint64_t a0, uint64_t a1, uint64_t a2,
		uint64_t a3, uint64_t a4, uint64_t a5);
/* Copy len bytes into the scratch area at off: their tracee address, or 0. */
uint64_t gb_rput(struct gb_rctx *c, size_t off, const void *buf, size_t len);

/* Reopen the snapshot's fds in the tracee (docs/resume.md, "Files"). */
int gb_resume__fds(struct gb_rctx *c, const struct gb_snapshot *s);
/* rfdkind.c: those that are kernel objects (snap/fdkind.h) made again, after
 * the files; gb_resume__fd_made: f is one of them (a pipe only when both
 * of its ends were in the process). */
int gb_resume__fd_kinds(struct gb_rctx *c, const struct gb_snapshot *s);
bool gb_resume__fd_made(const struct gb_snapshot *s, const struct gb_snap_fd *f);

/* rthreads.c: the snapshot's other threads cloned in the helper (each added
 * to *t, stopped), and every thread's kernel state: clear_child_tid, robust
 * list, alternate stack, name, rseq; glibc's cached tids set to the new
 * ones.  Needs the scratch area. */
int gb_resume__threads(struct gb_rctx *c, struct gb_tracee *t, const struct gb_snapshot *s);
/* The signals that were queued (per thread, then the process's), queued
 * again with their siginfo while every thread blocks all (needs the
 * scratch area). */
int gb_resume__pending(struct gb_rctx *c, const struct gb_tracee *t, const struct gb_snapshot *s);
/* Registers, XSAVE state and signal mask of every thread; a thread blocked
 * in a system call set to make it again as the kernel would after a signal
 * (docs/resume.md, "Threads in a system call"). */
int gb_resume__cpus(struct gb_rctx *c, const struct gb_tracee *t, const struct gb_snapshot *s);

/* rproc.c: the process-wide kernel state.  Before the threads: umask, cwd,
 * signal dispositions; at the end: interval timers (needs the scratch
 * area), then resource limits (set by gebpf with prlimit) and the one line
 * saying what could not be restored. */
int gb_resume__proc(struct gb_rctx *c, const struct gb_snapshot *s);
int gb_resume__timers(struct gb_rctx *c, const struct gb_snapshot *s);
void gb_resume__limits(struct gb_rctx *c, const struct gb_snapshot *s);

#endif
