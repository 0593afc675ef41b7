/* A syscall trampoline on a scratch page mapped into the tracee, so that a
 * thread can run one syscall (the page trap's re-protecting mprotect) on its
 * way back to native execution without stopping for it:
 *
 *   syscall                      ; with the registers the caller set
 *   mov rax/rcx/r11/rdi/rsi/rdx, [data]   ; the thread's own values back
 *   jmp [data.rip]               ; where it was going
 *
 * RFLAGS survive the syscall (sysret restores them from r11, which the
 * syscall instruction loaded with them); nothing touches the stack.  A stop
 * of the thread before its trampoline finished is settled by putting its
 * own registers back (gb_tramp__settle), so nothing ever sees the
 * trampoline: not a signal handler, a snapshot, or a detach. */
#ifndef GB_PTRACE_TRAMP_H
#define GB_PTRACE_TRAMP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

struct gb_tramp;

/* Where the page goes: far from where the program's own mappings go. */
#define GB_TRAMP_ADDR 0x200000000000ull   /* 32 TiB */

/* Map the page into pid through stopped thread tid (an injected mmap through
 * the syscall instruction at syscall_insn).  NULL on failure. */
struct gb_tramp *gb_tramp__new(pid_t pid, pid_t tid, uint64_t syscall_insn, int *pending_sig);
/* Set up stopped thread tid (registers r) to run syscall nr(a0, a1, a2) on
 * its way to r->rip; the caller then resumes it with PTRACE_CONT and no
 * signal.  0 or -errno. */
int gb_tramp__launch(struct gb_tramp *t, pid_t tid, const struct user_regs_struct *r, long nr,
		     uint64_t a0, uint64_t a1, uint64_t a2);
/* At any stop of tid: if it is inside the trampoline, give it its own
 * registers back.  Returns 1 if it was (and *ran_syscall says whether the
 * syscall had run), 0 if not. */
int gb_tramp__settle(struct gb_tramp *t, pid_t tid, bool *ran_syscall);
/* Unmap the page through stopped thread tid (of the process, or of a fork
 * child that got a copy of it); a signal that arrives meanwhile goes to
 * *pending_sig. */
void gb_tramp__unmap(struct gb_tramp *t, pid_t tid, uint64_t syscall_insn, int *pending_sig);
/* Free the bookkeeping (the page stays: unmap it first, or it went with an
 * old image or process). */
void gb_tramp__free(struct gb_tramp *t);

#endif
