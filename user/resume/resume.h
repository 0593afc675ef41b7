/* Resume a snapshot: recreate its process and let it run on (docs/resume.md).
 *
 * A helper process is launched under ptrace (the snapshot's executable, else
 * gebpf itself, ASLR off) and stopped before its first instruction; system
 * calls injected into it (ptrace/inject.h) then unmap its image and map each
 * of the snapshot's mappings at its address with its protections, set brk,
 * auxv and the stack start (prctl PR_SET_MM), and reopen the snapshot's
 * files at their fd numbers.  Registers (general, fs/gs base, XSAVE state)
 * and the blocked-signal mask are set last.  The result is a stopped tracee
 * at the snapshot's next instruction, the same shape a launch produces.
 *
 *   struct gb_snapshot *s;   gb_snapshot_load(path, &s, ...);
 *   gb_resume_edit_reg(s, "rax=0x5");  gb_resume_edit_poke(s, "0x401000=90");
 *   struct gb_tracee t;      gb_resume_restore(s, &t, "resume: FILE");
 *   ... detach (gebpf resume) or hand t to the trace engine (trace --from) ...
 *
 * Every thread is rebuilt (rthreads.c), with the process-wide kernel state
 * (rproc.c).
 */
#ifndef GB_RESUME_RESUME_H
#define GB_RESUME_RESUME_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "ptrace/tracee.h"
#include "snap/snapshot.h"

/* Build the process of snapshot s as a stopped tracee in *t.  Warnings
 * (fds replaced by /dev/null, ...) are printed as they happen.  0, or
 * -errno with one "gebpf: WHAT: <why>" line (nothing left running). */
/* How to restore: a new pid namespace, and the user's choices for fds
 * (--fd N=close|PATH: path NULL to close it). */
struct gb_fd_choice {
	int fd;
	const char *path;
};
struct gb_restore_opts {
	bool new_pidns;
	const struct gb_fd_choice *fds;
	size_t nfds;
};
int gb_resume_restore(const struct gb_snapshot *s, struct gb_tracee *t, const char *what,
		      const struct gb_restore_opts *o);

/* --set REG=VALUE: a general register of thread 0 by its note name (rax,
 * rip, eflags, fs_base, ...), VALUE hex (0x...) or decimal.  0, or -errno
 * with one "gebpf: resume: --set SPEC: <why>" line. */
int gb_resume_edit_reg(struct gb_snapshot *s, const char *spec);
/* --poke ADDR=HEX: bytes (hex digits, two per byte) written at ADDR.  0, or
 * -errno with one "gebpf: resume: --poke SPEC: <why>" line. */
int gb_resume_edit_poke(struct gb_snapshot *s, const char *spec);

/* gebpf resume: load path, apply the --set edits then the --poke ones (in
 * order), restore, detach and wait.  The exit code: the process's exit
 * status (128+N when signal N killed it, with one line), GB_EXIT_USAGE for a
 * bad edit, GB_EXIT_FAIL when it could not be rebuilt. */
struct gb_resume_opts {
	const char *path;
	const char *const *sets, *const *pokes;
	size_t nsets, npokes;
	bool new_pidns;      /* its own pid and tids, in a new pid namespace */
	const struct gb_fd_choice *fds;   /* --fd */
	size_t nfds;
};
int gb_resume_run(const struct gb_resume_opts *o);

/* trace --from SNAP: load path and restore it into *t; *vt is the snapshot's
 * vt (0 when it has none).  0, or -1 with a "gebpf: ..." line printed. */
int gb_resume_start(const char *path, struct gb_tracee *t, uint64_t *vt);

#endif
