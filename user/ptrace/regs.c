#include "ptrace/regs.h"

#include <cpuid.h>
#include <elf.h>
#include <errno.h>
#include <sys/ptrace.h>
#include <sys/uio.h>

int gb_regs_get(pid_t tid, struct user_regs_struct *r)
{
	return ptrace(PTRACE_GETREGS, tid, 0, r) ? -errno : 0;
}

int gb_regs_set(pid_t tid, const struct user_regs_struct *r)
{
	return ptrace(PTRACE_SETREGS, tid, 0, r) ? -errno : 0;
}

int gb_fpregs_get(pid_t tid, struct user_fpregs_struct *f)
{
	return ptrace(PTRACE_GETFPREGS, tid, 0, f) ? -errno : 0;
}

int gb_fpregs_set(pid_t tid, const struct user_fpregs_struct *f)
{
	return ptrace(PTRACE_SETFPREGS, tid, 0, f) ? -errno : 0;
}

int gb_xstate_set(pid_t tid, const void *buf, size_t len)
{
	struct iovec iov = { (void *)buf, len };
	return ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &iov) ? -errno : 0;
}

int gb_xstate_get(pid_t tid, void *buf, size_t *len)
{
	struct iovec iov = { buf, *len };
	if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &iov))
		return -errno;
	*len = iov.iov_len;
	return 0;
}

size_t gb_xstate_size(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid_count(0xd, 0, &a, &b, &c, &d) || b == 0)
		return 512 + 64; /* legacy area + header */
	return b;
}
