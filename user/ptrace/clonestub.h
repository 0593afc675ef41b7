/* System calls made in a stopped thread of the target from a stub that
 * puts the thread back by itself, so that neither the thread nor (for the
 * clone that makes the copy-on-write copy, cow.h) the copy ever depends on
 * gebpf being alive.  One call per run of the stub; the kernel state's
 * queries (kstate.h) are calls whose result the kernel writes to memory the
 * thread does not use (below its red zone):
 *
 *   rt_sigprocmask(SIG_SETMASK, &all, NULL)
 *   the call (number and up to six arguments from the stub's data)
 *   a clone's child (0 from clone): exit_group(0)   the copy never returns
 *   rt_sigprocmask(SIG_SETMASK, &mask, NULL)        the thread's own mask
 *   popfq, the thread's own registers back, jmp to where it was
 *
 * The clone's copy is born with every signal blocked (no handler of the program can
 * run in it) and, while gebpf traces the thread, auto-attached with a
 * ptrace stop pending before its first instruction: gebpf holds it there
 * (with PTRACE_O_EXITKILL) and kills it when done.  If the tracer is gone
 * before it holds it, the kernel drops the pending stop and the copy's first
 * instructions are the stub's exit_group.
 *
 * First the thread is brought to a stop in user mode as the kernel would
 * resume it: a signal it was stopped to take is delivered, a syscall it was
 * stopped in is restarted by the kernel up to its entry (made a stop on its
 * syscall instruction), and a signal on the way is delivered on its own
 * registers (it then starts from its handler's entry).  No signal is ever
 * taken from it and kept.  The thread is driven through the stub with
 * PTRACE_SYSCALL (never a single step: a trap flag outlives a dead tracer)
 * and ends in a PTRACE_INTERRUPT stop with its registers exactly as before
 * (or the handler's).  Left alone at any moment (the
 * tracer killed), it runs the rest of the stub natively and goes on where it
 * was, with its signal mask, flags and registers (an interrupted syscall
 * restarted, as the kernel restarts it).
 *
 * What is not crash-safe: the mmap and munmap of the stub page themselves
 * (ptrace/inject.h, a few ptrace round trips each).  The page itself, if
 * left behind, is never entered again. */
#ifndef GB_PTRACE_CLONESTUB_H
#define GB_PTRACE_CLONESTUB_H

#include <stdint.h>
#include <sys/types.h>

/* Make system call nr (args: rdi, rsi, rdx, r10, r8, r9) in stopped thread tid
 * of pid through the stub: 0 with its return value in *ret (and, for a
 * clone, the child's pid in *child), errors as for gb_snap_clone_stub.
 * insn 0: no page of its own where the vDSO has no room (-ENOSPC: nothing
 * is injected, so nothing that is not crash-safe). */
int gb_snap_stub_call(pid_t pid, pid_t tid, uint64_t insn, long nr, const uint64_t args[6],
		      long *ret, pid_t *child, int *pending_sig);

/* Clone stopped thread tid of pid through the stub (insn: an existing
 * syscall instruction, for the stub page's mmap and munmap).  0 with the
 * clone's return value in *ret (-errno when the kernel refused it) and the
 * copy's pid in *child (0 if none was reported), or -errno when the stub
 * could not be run (-ESRCH: the thread died; -EINTR: interrupted, the thread
 * finishes the stub on its own once detached).  A signal that arrives
 * meanwhile goes to *pending_sig (if 0) for later delivery. */
int gb_snap_clone_stub(pid_t pid, pid_t tid, uint64_t insn, long *ret, pid_t *child, int *pending_sig);

#endif
