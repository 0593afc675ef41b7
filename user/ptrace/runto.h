/* Run one stopped thread natively until it reaches an address (an int3 is
 * planted there and removed again; the thread is left stopped at addr with
 * the original byte back in place).  Other threads stay as they are. */
#ifndef GB_PTRACE_RUNTO_H
#define GB_PTRACE_RUNTO_H

#include <stdint.h>
#include <sys/types.h>

#include "ptrace/tracee.h"

/* 0: stopped at addr.  -ESRCH: the process exited first (t->exited set).
 * -EINTR: Ctrl-C/SIGTERM arrived.  Other -errno: failure.  Signals the
 * thread receives on the way are delivered to it; threads it creates are
 * added to t, stopped (the caller resumes or snapshots them). */
int gb_run_to(struct gb_tracee *t, pid_t tid, uint64_t addr);

/* Called at every syscall-entry and -exit stop of the running thread. */
typedef void (*gb_syscall_hook)(void *ctx, pid_t tid);
/* gb_run_to that stops at syscalls (PTRACE_SYSCALL) to call hook there. */
int gb_run_to_hooked(struct gb_tracee *t, pid_t tid, uint64_t addr, gb_syscall_hook hook,
		     void *ctx);

/* AT_ENTRY of the process (the executable's entry point), 0 if unknown. */
uint64_t gb_auxv_entry(pid_t pid);

#endif
