/* Registers of a stopped thread. */
#ifndef GB_PTRACE_REGS_H
#define GB_PTRACE_REGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

int gb_regs_get(pid_t tid, struct user_regs_struct *r);         /* 0 or -errno */
int gb_regs_set(pid_t tid, const struct user_regs_struct *r);
int gb_fpregs_get(pid_t tid, struct user_fpregs_struct *f);
int gb_fpregs_set(pid_t tid, const struct user_fpregs_struct *f);
/* Load an XSAVE area (NT_X86_XSTATE): exactly the kernel's regset size,
 * in this machine's layout (decode/xsave.h converts a snapshot's). */
int gb_xstate_set(pid_t tid, const void *buf, size_t len);
/* The XSAVE area (NT_X86_XSTATE).  *len in: buffer size; out: bytes filled
 * (the kernel truncates to the buffer: see gb_xstate_read). */
int gb_xstate_get(pid_t tid, void *buf, size_t *len);
/* The whole XSAVE area as the kernel's regset holds it, in *buf (grown as
 * needed; *cap its size) and *len: the kernel's own size, which is the one
 * to trust (CPUID 0xD's EBX can be smaller than the regset). */
int gb_xstate_read(pid_t tid, uint8_t **buf, size_t *cap, size_t *len);
/* A thread stopped inside a syscall that the kernel will restart when it
 * resumes (interrupted while blocked): rip is past the syscall instruction,
 * rax holds -ERESTART*, and resuming re-executes the syscall instruction. */
static inline bool gb_regs_restarting_syscall(const struct user_regs_struct *r)
{
	long rax = (long)r->rax;
	return (long)r->orig_rax >= 0 && (rax == -512 || rax == -513 || rax == -514 || rax == -516);
}

#endif
