#include "ptrace/regs.h"

#include <elf.h>
#include <errno.h>
#include <stdlib.h>
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

int gb_xstate_read(pid_t tid, uint8_t **buf, size_t *cap, size_t *len)
{
	for (;;) {
		if (*cap < 4096) {
			uint8_t *n = realloc(*buf, 16384);
			if (!n)
				return -ENOMEM;
			*buf = n;
			*cap = 16384;
		}
		size_t got = *cap;
		int r = gb_xstate_get(tid, *buf, &got);
		if (r)
			return r;
		if (got < *cap) {
			*len = got;
			return 0;
		}
		/* Filled to the brim: the regset may be larger still. */
		if (*cap >= (1u << 20))
			return -E2BIG;
		uint8_t *n = realloc(*buf, *cap * 2);
		if (!n)
			return -ENOMEM;
		*buf = n;
		*cap *= 2;
	}
}
