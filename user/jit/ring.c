/* The record ring: see jit.h.  The stop-free mode's protocol (a consumer
 * draining while the program runs, a writer that wakes it, waits for it and
 * gives up on it) is at the end (docs/trace.md "A trap without stops"). */
#include <errno.h>
#include <string.h>

#include "jit/internal.h"

void gb_jit__ring_reset(struct gb_jit *j)
{
	*dword(j, HEAD) = daddr(j, RING);
	*dword(j, BUDGET) = GB_JIT_RING_SIZE / 8 / BLOCK_WORDS;
}

size_t gb_jit__ring_used(const struct gb_jit *j)
{
	uint64_t h = *(volatile uint64_t *)dword(j, HEAD);
	uint64_t lo = daddr(j, RING), hi = lo + GB_JIT_RING_SIZE;
	return h >= lo && h <= hi ? (size_t)(h - lo) / 8 : 0;
}

void gb_jit__ring_unwrite(struct gb_jit *j, size_t words)
{
	size_t used = gb_jit__ring_used(j);
	*dword(j, HEAD) = daddr(j, RING) + 8 * (used > words ? used - words : 0);
}

int gb_jit__ring_next(const struct gb_jit *j, size_t *pos, uint64_t fs_base, uint64_t gs_base,
		      struct gb_jit_rec *out)
{
	size_t used = gb_jit__ring_used(j);
	const uint64_t *w = (const uint64_t *)(j->m.data + RING);
	if (*pos >= used)
		return 0;
	uint64_t id = w[(*pos)++];
	if (id >= j->nin)
		return -EINVAL;
	const struct insn *in = &j->in[id];
	out->pc = in->pc;
	out->len = in->len;
	out->nacc = 0;
	for (unsigned k = 0; k < in->nrefs; k++) {
		const struct ref *r = &in->refs[k];
		uint64_t a = (uint64_t)r->disp;
		if (r->rt) {
			if (*pos >= used)
				return -EINVAL;
			a = w[(*pos)++];
		}
		if (r->flags & GB_REF_ADDR32)
			a = (uint32_t)a;
		if (r->flags & GB_REF_FS)
			a += fs_base;
		else if (r->flags & GB_REF_GS)
			a += gs_base;
		out->acc[out->nacc++] = (struct gb_access){ a, r->size, r->flags & GB_REF_WRITE };
	}
	return 1;
}

