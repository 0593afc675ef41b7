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
 * signal).  Only a kill of the worker itself is not covered.
 */
#ifndef GB_COMMON_GUARD_H
#define GB_COMMON_GUARD_H

/* Returns 0 in the worker.  In the calling process it returns only when no
 * worker could be made (-errno: carry on without one); otherwise it exits
 * with the worker's status. */
int gb_guard(void);

#endif
