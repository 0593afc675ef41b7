/* gb_insn_accesses(): runs an instruction's plan against a register state.
 * Called once per stepped instruction: no allocation, no decoding, no
 * formatting; the plan (plan.c) holds everything that depends on the bytes. */
#include <errno.h>

#include "decode/decode.h"
#include "decode/plan.h"

static int refs(const struct gb_plan *p, const struct gb_cpu *cpu, int64_t adj,
		struct gb_access *out, int max)
{
	int n = 0;

	for (int i = 0; i < p->nrefs && n >= 0; i++) {
		const struct gb_memref *r = &p->refs[i];
		n = gb_emit(out, n, max, gb_ref_addr(r, cpu, adj), r->size, r->flags & GB_REF_WRITE);
	}
	return n;
}

/* bt* [mem], reg: the signed bit offset picks the unit holding the bit. */
static int bit_test(const struct gb_plan *p, const struct gb_cpu *cpu,
		    struct gb_access *out, int max)
{
	uint64_t v = gb_cpu_reg(cpu, p->reg);
	int64_t off, unit;

	switch (p->reg_bits) {
	case 16: off = (int16_t)v; unit = off >> 4; break;
	case 32: off = (int32_t)v; unit = off >> 5; break;
	default: off = (int64_t)v; unit = off >> 6; break;
	}
	return refs(p, cpu, unit * (p->reg_bits / 8), out, max);
}

/* enter N, L: push RBP; L-1 frame pointers copied from the old frame (read
 * [RBP - i*w], then push it); push the new frame pointer. */
static int enter(const struct gb_plan *p, const struct gb_cpu *cpu, struct gb_access *out, int max)
{
	uint64_t w = p->elem, sp = cpu->rsp, bp = cpu->rbp;
	int n = 0;

	n = gb_emit(out, n, max, sp - w, w, true);
	for (unsigned i = 1; p->level && i < p->level && n >= 0; i++) {
		n = gb_emit(out, n, max, bp - i * w, w, false);
		if (n >= 0)
			n = gb_emit(out, n, max, sp - w - i * w, w, true);
	}
	if (p->level && n >= 0)
		n = gb_emit(out, n, max, sp - w - p->level * w, w, true);
	return n;
}

int gb_insn_accesses(const struct gb_insn *insn, const struct gb_cpu *cpu,
		     struct gb_access *out, int max)
{
	const struct gb_plan *p = &insn->plan;

	switch (p->kind) {
	case GB_PLAN_NONE:
		return 0;
	case GB_PLAN_REFS:
		return refs(p, cpu, 0, out, max);
	case GB_PLAN_STRING:
		if (p->reg_bits) {
			uint64_t cnt = gb_cpu_reg(cpu, p->reg);
			if (p->reg_bits == 32)
				cnt = (uint32_t)cnt;
			if (!cnt)
				return 0;
		}
		return refs(p, cpu, 0, out, max);
	case GB_PLAN_BT:
		return bit_test(p, cpu, out, max);
	case GB_PLAN_ENTER:
		return enter(p, cpu, out, max);
	case GB_PLAN_XSAVE: {
		uint64_t rfbm = (cpu->rdx << 32) | (uint32_t)cpu->rax;
		const struct gb_memref *r = &p->refs[0];
		uint32_t size = gb_xsave_extent(rfbm, r->flags & GB_REF_XSAVE_C);
		return gb_emit(out, 0, max, gb_ref_addr(r, cpu, 0), size, r->flags & GB_REF_WRITE);
	}
	case GB_PLAN_VSIB:
	case GB_PLAN_MASKED:
	case GB_PLAN_COMPRESS:
		return gb_vec_accesses(insn, cpu, out, max);
	default:
		return -EINVAL;
	}
}
