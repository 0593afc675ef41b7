/* Run a system call inside a stopped tracee thread, leaving it exactly as it
 * was: registers and flags restored, nothing written to its stack (the red
 * zone is untouched), errno untouched (no libc involved), a signal that
 * arrives meanwhile kept for later delivery.
 *
 * The syscall instruction used is an existing one: a `0f 05` in the vDSO,
 * else in another executable mapping of the process.
 *
 * The syscall is single-stepped: a tracer killed meanwhile leaves the
 * thread with the trap flag set and the injected registers (it dies).  What
 * must survive a killed tracer must run from code that needs no tracer to
 * finish (gebpf snap's clone does).
 */
#ifndef GB_PTRACE_INJECT_H
#define GB_PTRACE_INJECT_H

#include <stdint.h>
#include <sys/types.h>

/* Address of a syscall instruction in pid's address space whose two bytes
 * are not on pages for which avoid(ctx, page address) is nonzero (the pages
 * whose protection we change; avoid may be NULL); 0 when none is found. */
uint64_t gb_inject_find_syscall(pid_t pid, int (*avoid)(void *ctx, uint64_t page), void *ctx);

/* Execute syscall nr(args) in stopped thread tid through the syscall
 * instruction at insn.  Returns 0 with the syscall's return value in *ret,
 * or -errno when the injection itself failed (-ESRCH: the thread died).
 * A signal that was pending for the thread is stored in *pending_sig (if
 * *pending_sig was 0) for the caller to deliver later. */
int gb_inject_syscall(pid_t tid, uint64_t insn, long nr, const uint64_t args[6], long *ret,
		      int *pending_sig);
/* The same, and when the syscall stops at a ptrace event (PTRACE_EVENT_CLONE,
 * _FORK, _VFORK of a clone/fork with the matching PTRACE_O_TRACE* option),
 * *event_msg receives its PTRACE_GETEVENTMSG (the new task's pid as the
 * tracer sees it; 0 when no event stop came). */
int gb_inject_syscall_ev(pid_t tid, uint64_t insn, long nr, const uint64_t args[6], long *ret,
			 int *pending_sig, unsigned long *event_msg);
/* The same through syscall-entry and -exit stops (PTRACE_SYSCALL) instead of
 * single steps: the thread is left with no single-step state, so a tracer
 * killed while it holds the thread stopped afterwards leaves it running as
 * it was (a single step's trap flag would stay set and kill it with SIGTRAP
 * at its next instruction).  The tracee needs PTRACE_O_TRACESYSGOOD. */
int gb_inject_syscall_nostep(pid_t tid, uint64_t insn, long nr, const uint64_t args[6], long *ret,
			     int *pending_sig);

#endif
