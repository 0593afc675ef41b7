/* System calls injected into the helper process, and the one failure line
 * of every restore step: see resume_int.h. */
#include "resume/resume_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "common/log.h"

#include "ptrace/inject.h"
#include "ptrace/mem.h"

long gb_rsys_in(struct gb_rctx *c, pid_t tid, long nr, uint64_t a0, uint64_t a1, uint64_t a2,
		uint64_t a3, uint64_t a4, uint64_t a5)
{
	const uint64_t args[6] = { a0, a1, a2, a3, a4, a5 };
	long ret = 0;
	int pending = 0;
	int e = gb_inject_syscall(tid, c->insn, nr, args, &ret, &pending);
	return e ? e : ret;
}

long gb_rsys(struct gb_rctx *c, long nr, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
	     uint64_t a4, uint64_t a5)
{
	return gb_rsys_in(c, c->pid, nr, a0, a1, a2, a3, a4, a5);
}

uint64_t gb_rput(struct gb_rctx *c, size_t off, const void *buf, size_t len)
{
	if (!c->scratch || off + len > GB_RSCRATCH_LEN)
		return 0;
	ssize_t n = gb_mem_write(c->pid, c->scratch + off, buf, len);
	return n == (ssize_t)len ? c->scratch + off : 0;
}

int gb_resume__fail(struct gb_rctx *c, int e, const char *fmt, ...)
{
	char why[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return gb_fail(e < 0 ? e : -EIO, "%s: %s", c->what, why);
}
