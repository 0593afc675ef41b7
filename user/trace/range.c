/* The traced range: see range.h. */
#include "trace/range.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/user.h>

#include "common/log.h"
#include "ptrace/maps.h"
#include "ptrace/regs.h"
#include "record/jsonl.h"
#include "sym/boundary.h"
#include "sym/entries.h"
#include "sym/syms.h"

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

const char *gb_trace_range_file(pid_t pid, uint64_t start, uint64_t end, char *path, size_t len,
				uint64_t *lo, uint64_t *hi, uint64_t *bias)
{
	uint64_t vhi, off;
	/* Code on a writable page may be rewritten under the probes (and the
	 * probes' int3 with it): the page trap watches such code. */
	struct gb_maps m;
	if (gb_maps_read(pid, &m) == 0) {
		bool writable = false;
		for (size_t k = 0; k < m.n; k++)
			if (m.v[k].start <= end && m.v[k].end > start && (m.v[k].prot & PROT_WRITE))
				writable = true;
		gb_maps_free(&m);
		if (writable)
			return "on writable pages (code may change)";
	}
	struct gb_syms *sy = gb_syms__new(pid);
	if (!sy)
		return "no symbols";
	int r = gb_syms__to_file(sy, start, path, len, lo, &off);
	if (!r) {
		char path2[4096];
		r = gb_syms__to_file(sy, end, path2, sizeof(path2), &vhi, &off);
		if (!r && (strcmp(path, path2) || vhi - *lo != end - start))
			r = -EXDEV;
	}
	gb_syms__free(sy);
	if (r)
		return r == -EXDEV ? "not in one file's code (it spans several mappings)"
				   : "not in one file's code (anonymous memory)";
	*hi = vhi;
	*bias = start - *lo;
	return NULL;
}

bool gb_trace_range_mapped_exec(pid_t pid, uint64_t start, uint64_t end)
{
	struct gb_maps m;
	uint64_t at = start;
	if (gb_maps_read(pid, &m))
		return false;
	for (bool moved = true; moved && at <= end;) {
		moved = false;
		for (size_t k = 0; k < m.n && at <= end; k++)
			if (m.v[k].start <= at && at < m.v[k].end && (m.v[k].prot & PROT_EXEC)) {
				at = m.v[k].end;
				moved = true;
			}
	}
	gb_maps_free(&m);
	return at > end;
}

/* FNV-1a over n bytes, from h. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	for (const unsigned char *b = p; n--; b++)
		h = (h ^ *b) * 0x100000001b3ull;
	return h;
}

uint64_t gb_trace_range_maps_key(pid_t pid, uint64_t start, uint64_t end)
{
	struct gb_maps m;
	uint64_t h = 0;
	if (gb_maps_read(pid, &m))
		return 0;
	for (size_t k = 0; k < m.n; k++) {
		const struct gb_map *mp = &m.v[k];
		if (mp->start > end || mp->end <= start)
			continue;
		uint64_t f[5] = { mp->start, mp->end, mp->offset, mp->inode, (uint64_t)mp->prot };
		h = fnv1a(fnv1a(h * 31 + 1, f, sizeof(f)), mp->path, strlen(mp->path));
	}
	gb_maps_free(&m);
	return h;
}

uint64_t gb_trace_range_early(pid_t pid, const struct gb_range_spec *r, bool entries)
{
	char path[4096];
	uint64_t lo, hi, bias;
	if (entries && r->has_start && r->has_end &&
	    !gb_trace_range_file(pid, r->start, r->end, path, sizeof(path), &lo, &hi, &bias))
		gb_entries_prefetch(path, lo, hi);
	return gb_trace_range_maps_key(pid, r->start, r->end);
}

int gb_trace_range_check_start(pid_t pid, const char *text, uint64_t start)
{
	struct gb_boundary b;
	if (gb_boundary_check(pid, start, &b))
		return 0; /* (out of memory: not checked) */
	if (b.kind == GB_BOUNDARY_UNKNOWN && !b.func[0])
		gb_info("range %s: 0x%llx %s: not checked that an instruction starts there", text,
			(unsigned long long)start, b.why);
	else if (b.kind == GB_BOUNDARY_UNKNOWN)
		gb_info("range %s: 0x%llx (%s+0x%llx): %s: not checked that an instruction starts "
			"there", text, (unsigned long long)start, b.func,
			(unsigned long long)(start - b.fn), b.why);
	if (b.kind != GB_BOUNDARY_INSIDE)
		return 0;
	gb_err("trace: range %s: 0x%llx is inside the instruction at 0x%llx (%s+0x%llx); start the "
	       "range at an instruction: 0x%llx or 0x%llx", text, (unsigned long long)start,
	       (unsigned long long)b.prev, b.func, (unsigned long long)(b.prev - b.fn),
	       (unsigned long long)b.prev, (unsigned long long)b.next);
	return -EINVAL;
}
