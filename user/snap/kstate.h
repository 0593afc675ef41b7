/* Inside the snap room: the kernel state of a stopped process that resume
 * needs and that neither memory nor registers hold (docs/snapshot-format.md,
 * "process" and the thread entries of the JSON note).
 *
 * Read from /proc and with ptrace where the kernel shows it to a tracer
 * (thread names, get_robust_list, PTRACE_GET_RSEQ_CONFIGURATION, umask,
 * cwd, prlimit); the rest (clear_child_tid, alternate signal stacks, signal
 * dispositions, interval timers) with system calls made in the stopped
 * target from the self-restoring stub (clonestub.h: a thread left alone by
 * a killed gebpf finishes it and goes on as it was), their results put 256
 * bytes of its stack below the red zone and those bytes put back, as
 * CRIU's parasite asks the process itself.  Where the vDSO has no room for
 * the stub nothing is injected (those parts are left out).  Nothing is injected into a process under
 * seccomp (a filter could kill it for a call): those parts are then left
 * out (said with -v; resume names them).  A part that cannot be read is left out (its
 * GB_TS_* / GB_PS_* bit clear); the capture never fails for it.
 */
#ifndef GB_SNAP_KSTATE_H
#define GB_SNAP_KSTATE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "snap/snapshot.h"

struct gb_tracee;
struct gb_thread;

struct gb_snap_kctx {
	pid_t pid;          /* host pid of the target */
	bool inject;        /* false: inject nothing (seccomp) */
};

/* Decide whether to inject (seccomp). */
void gb_snap__kstate_begin(struct gb_snap_kctx *k, pid_t pid);
/* Thread th's state into t->ks (th stopped). */
void gb_snap__kstate_thread(const struct gb_snap_kctx *k, struct gb_thread *th,
			    struct gb_snap_thread *t);
/* The process-wide state into s->pk, injecting in thread th (stopped). */
void gb_snap__kstate_proc(const struct gb_snap_kctx *k, struct gb_thread *th, struct gb_snapshot *s);

#endif
