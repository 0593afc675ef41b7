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
/* Load an XSAVE area (standard format, gb_xstate_size() bytes). */
int gb_xstate_set(pid_t tid, const void *buf, size_t len);
/* The XSAVE area (NT_X86_XSTATE).  *len in: buffer size; out: bytes filled. */
int gb_xstate_get(pid_t tid, void *buf, size_t *len);
/* A thread stopped inside a syscall that the kernel will restart when it
 * resumes (interrupted while blocked): rip is past the syscall instruction,
 * rax holds -ERESTART*, and resuming re-executes the syscall instruction. */
static inline bool gb_regs_restarting_syscall(const struct user_regs_struct *r)
{
	long rax = (long)r->rax;
	return (long)r->orig_rax >= 0 && (rax == -512 || rax == -513 || rax == -514 || rax == -516);
}

/* Size of the XSAVE area the kernel exposes (CPUID 0xD, ECX=0: EBX). */
size_t gb_xstate_size(void);

#endif
