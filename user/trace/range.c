/* The traced range: see range.h. */
#include "trace/range.h"

#include <errno.h>
#include <sys/syscall.h>
#include <sys/user.h>

#include "ptrace/regs.h"
#include "record/jsonl.h"

void gb_trace_range_set(struct gb_trace_range *r, uint64_t start, uint64_t end)
{
	if (!r->pending && r->has_start && r->has_end && r->start == start && r->end == end)
		return;
	r->has_start = r->has_end = true;
	r->start = start;
	r->end = end;
	r->pending = false;
	r->gen++;
	if (r->out)
		gb_jsonl__set_range(r->out, true, start, true, end);
}

void gb_trace_range_pend(struct gb_trace_range *r)
{
	if (!r->pending)
		r->gen++;
	r->pending = true;
}

int gb_trace_range_exec(struct gb_trace_range *r, pid_t pid)
{
	uint64_t s = r->start, e = r->end;
	int rc = r->rerange ? r->rerange(r->rerange_ctx, pid, &s, &e) : -1;
	if (rc == 0)
		gb_trace_range_set(r, s, e);
	else if (rc == -EAGAIN)
		gb_trace_range_pend(r);
	return rc;
}

void gb_trace_range_after_syscall(struct gb_trace_range *r, pid_t pid, pid_t tid)
{
	struct user_regs_struct regs;
	uint64_t s = 0, e = 0;
	if (!r->pending || !r->rerange || gb_regs_get(tid, &regs) || regs.orig_rax != SYS_mmap ||
	    r->rerange(r->rerange_ctx, pid, &s, &e))
		return;
	gb_trace_range_set(r, s, e);
}
