/* The patch trap's set-up (docs/trace.md "The patch trap"): whether it
 * applies to the stopped target, the cache mapped, the range translated up
 * front, the patches planned.  The hooks are trap_patch.c's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/user.h>

#include "common/grow.h"
#include "common/log.h"
#include "ptrace/maps.h"
#include "ptrace/mem.h"
#include "ptrace/regs.h"
#include "ptrace/tracee.h"
#include "sym/entries.h"
#include "trace/trap_patch.h"

/* Ranges of at most this many instructions get a block from each. */
#define PATCH_EVERY 8192

/* Why the trap does not apply to t now (NULL: it may), before anything is
 * done to the target. */
static const char *refuse(const struct gb_tracee *t, char *buf, size_t len)
{
	size_t live = 0;
	for (size_t i = 0; i < t->nthreads; i++) {
		struct user_regs_struct r;
		if (t->threads[i].exited)
			continue;
		live++;
		if (gb_regs_get(t->threads[i].tid, &r) == 0 && r.gs_base) {
			snprintf(buf, len, "thread %d uses its gs base", t->threads[i].tid);
			return buf;
		}
	}
	if (live > GB_JIT_TLS_COUNT) {
		snprintf(buf, len, "%zu threads (at most %u)", live, GB_JIT_TLS_COUNT);
		return buf;
	}
	return NULL;
}

/* The range's instructions, decoded in order from its original bytes:
 * each translatable (else why). */
static const char *sweep(struct patch_trap *pt, struct gb_insn **out, size_t *n, char *buf,
			 size_t len)
{
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	for (uint64_t a = pt->start; a <= pt->end;) {
		if (GB_GROW(out, &cap, *n + 1))
			return "out of memory";
		struct gb_insn *in = &(*out)[*n];
		if (gb_decode(a, pt->code + (a - pt->start), GB_INSN_MAX_LEN, in) ||
		    !gb_jit__nostop_supported(in)) {
			snprintf(buf, len, "the instruction at 0x%llx cannot run translated",
				 (unsigned long long)a);
			return buf;
		}
		a += in->len;
		++*n;
	}
	return NULL;
}

/* The plan over the range's entries, each translated; the first refusal's
 * reason. */
static const char *plan(struct patch_trap *pt, const char *path, uint64_t lo, uint64_t hi,
			uint64_t bias, const struct gb_insn *ins, size_t nins, char *buf, size_t len)
{
	struct gb_entries en = { 0 };
	struct gb_maps m;
	struct gb_patch_map *pm = NULL;
	uint64_t *ev = NULL;
	const char *why = NULL;
	if (gb_entries_find(path, lo, hi, &en, NULL)) {
		why = "the range's entries cannot be found";
		goto out;
	}
	if (gb_maps_read(pt->pid, &m)) {
		why = "no memory map";
		goto out;
	}
	pm = calloc(m.n + 1, sizeof(*pm));
	ev = calloc(en.n + 1, sizeof(*ev));
	for (size_t k = 0; pm && k < m.n; k++)
		pm[k] = (struct gb_patch_map){ m.v[k].start, m.v[k].end,
					       (m.v[k].prot & PROT_WRITE) != 0 };
	struct gb_patch_in in = { pt->start, pt->end, ev, en.n, ins, nins, pm, m.n, pt->map.addr,
				  pt->map.addr + GB_JIT_CODE_SIZE };
	for (size_t k = 0; ev && k < en.n; k++)
		ev[k] = en.v[k].vaddr + bias;
	if (!pm || !ev || gb_patch_plan(&in, &pt->plan))
		why = "out of memory";
	gb_maps_free(&m);
	/* Jump tables and other indirect targets inside the range: a block
	 * from every instruction (a lookup that misses runs on natively). */
	for (size_t k = 0; !why && nins <= PATCH_EVERY && k < nins; k++)
		if (gb_jit__translate_from(pt->j, ins[k].pc, patch_fetch, pt)) {
			why = "the code cache is full";
			break;
		}
	for (size_t k = 0; !why && k < pt->plan.n; k++) {
		struct gb_patch *p = &pt->plan.v[k];
		int r = p->why == GB_PATCH_OK ? gb_jit__translate_from(pt->j, p->addr, patch_fetch, pt) : 0;
		uint64_t blk = r || p->why != GB_PATCH_OK ? 0 : patch_entry_of(pt, p->addr);
		if (p->why != GB_PATCH_OK || !blk || gb_patch_set_target(p, blk)) {
			snprintf(buf, len, "the entry at 0x%llx cannot be patched (%s)",
				 (unsigned long long)p->addr,
				 p->why != GB_PATCH_OK ? gb_patch_why_str(p->why)
				 : r == -ENOSPC ? "the code cache is full" : "it does not translate");
			why = buf;
		}
		pt->npatched++;
	}
out:
	free(pm);
	free(ev);
	gb_entries_free(&en);
	return why;
}

struct gb_trap *gb_trap_patch_new(struct gb_tracee *t, struct gb_trace_range *rg, const char *path,
				  uint64_t lo, uint64_t hi, uint64_t bias)
{
	char buf[200];
	const char *why = refuse(t, buf, sizeof(buf));
	struct patch_trap *pt = why ? NULL : calloc(1, sizeof(*pt));
	struct gb_insn *ins = NULL;
	size_t nins = 0, i0 = 0;
	if (why)
		goto fail;
	while (t->threads[i0].exited)
		i0++;
	pt->base.ops = &patch_ops;
	pt->range = rg;
	pt->cur_i = -1;
	for (unsigned k = 0; k < GB_JIT_TLS_COUNT; k++)
		pt->area_of[k] = -1;
	pt->pid = t->pid;
	pt->start = lo + bias;
	pt->end = hi + bias;
	size_t n = (size_t)(pt->end - pt->start + 1);
	pt->code = calloc(1, n + GB_INSN_MAX_LEN);
	if (!pt->code || gb_mem_read(t->pid, pt->start, pt->code, n) != (ssize_t)n) {
		why = "its bytes cannot be read";
		goto fail;
	}
	if ((why = sweep(pt, &ins, &nins, buf, sizeof(buf))))
		goto fail;
	if (gb_jitmap_map(t->pid, t->threads[i0].tid, pt->start, pt->end, "using the probe trap",
			  &pt->map, &t->threads[i0].pending_sig)) {
		free(ins);
		patch_free(&pt->base);
		return NULL; /* (said) */
	}
	struct gb_jit_mem m = { pt->map.view, pt->map.view + GB_JIT_CODE_SIZE, pt->map.addr,
				pt->map.addr + GB_JIT_CODE_SIZE };
	struct gb_jit_opts o = { .nostop = true, .ring_timeout_ms = 1000 };
	pt->j = gb_jit__new_opts(&m, pt->start, pt->end, &o);
	if (!pt->j)
		why = "no translator";
	else
		why = plan(pt, path, lo, hi, bias, ins, nins, buf, sizeof(buf));
	free(ins);
	ins = NULL;
	if (why) {
		gb_jitmap_unmap_in(t->pid, t->threads[i0].tid, pt->map.addr, &t->threads[i0].pending_sig);
		goto fail;
	}
	gb_jit__ring_reset(pt->j);
	return &pt->base;
fail:
	gb_warn("range 0x%llx-0x%llx: the patch trap does not apply (%s): using the probe trap",
		(unsigned long long)(lo + bias), (unsigned long long)(hi + bias),
		why ? why : strerror(ENOMEM));
	free(ins);
	if (pt)
		patch_free(&pt->base);
	return NULL;
}
