/* A command whose death must not hurt its target (gebpf trace) runs in a
 * worker process, and the process the user started only waits for it.
 *
 * A thread that ptrace is single-stepping has the trap flag set; when its
 * tracer dies without detaching (SIGKILL, the OOM killer), the kernel lets
 * it run on with the flag still set, and its next instruction kills it with
 * SIGTRAP.  With the worker as the tracer, a SIGKILL of the gebpf the user
 * started (or of its shell job) reaches only the waiting process: the
 * worker gets SIGTERM (PR_SET_PDEATHSIG) and ends the trace as SIGTERM
 * ends it, detaching every thread as it was found.
 *
 * SIGINT, SIGTERM and SIGHUP sent to the waiting process are passed on to
 * the worker; it exits with the worker's status (or dies of the same
 * signal).
 *
 * A kill of the worker itself (SIGKILL, the OOM killer) leaves what it
 * changed in the target.  For code it overwrote (the patch trap's jumps),
 * the worker keeps an undo log in memory shared with the waiting process:
 * each place's original bytes, logged before the place is written and the
 * log cleared once they are back.  When the worker dies of a signal with
 * the log not empty, the waiting process holds every thread of the target
 * (PTRACE_SEIZE + PTRACE_INTERRUPT), writes the bytes back (through
 * /proc/PID/mem), lets every thread go as it was and says so in one line.
 * A kill of both leaves everything (docs/trace.md "Ending").
 */
#ifndef GB_COMMON_GUARD_H
#define GB_COMMON_GUARD_H

/* Returns 0 in the worker.  In the calling process it returns only when no
 * worker could be made (-errno: carry on without one); otherwise it exits
 * with the worker's status. */
int gb_guard(void);

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Is pid (as the user gave it: -p PID) this gebpf, the process the user
 * started or its worker, or one of their threads?  Compared both in gebpf's
 * pid namespace (the numbers ptrace uses) and in that of the /proc it reads
 * (another when gebpf runs in a pid namespace of its own without a /proc
 * of its own: /proc/PID may then be gebpf under another number).  Why it
 * cannot be the target, as text for "gebpf: pid N: <why>", or NULL. */
const char *gb_guard_self(pid_t pid);

#define GB_GUARD_UNDO_LEN 16
/* In the worker: the original bytes of a place of pid about to be
 * overwritten (len at most GB_GUARD_UNDO_LEN; one target at a time: a new
 * pid starts a new log).  Without a guard, nothing. */
void gb_guard_undo_add(pid_t pid, uint64_t addr, const uint8_t *bytes, unsigned len);
/* Everything logged is back (or gone with the image): nothing to undo. */
void gb_guard_undo_clear(void);
/* Test only (docs/testing.md "Killing the worker at a named step"): with
 * GEBPF_TEST_KILL_AT=NAME (or NAME:N) in the environment, the worker
 * SIGKILLs itself the first (N-th) time it passes the point NAME, as a
 * kill from outside would there; the points are the steps of the patch
 * trap's end (end-begin, end-restore once per entry, end-restored,
 * end-cleared, end-unwound, end-gs0, end-unmapped, end-detached).  Nothing
 * in the process the user started, without a worker, or without the
 * variable. */
void gb_guard_test_point(const char *name);
/* (guard.c's: the log made before the fork; run after the worker died) */
void gb_guard__undo_init(void);
void gb_guard__undo_run(void);

#endif
