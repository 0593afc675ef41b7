/* The patch planner: see patch.h. */
#include "jit/patch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/bound.h"
#include "common/sort.h"
#include "decode/plan.h"
#include "jit/emit.h"
#include "jit/jit.h"
#include "jit/reloc.h"

/* Can the instruction live only in the cache?  The translator takes it, and
 * what it addresses relative to its own place (RIP-relative operands, branch
 * targets) is within reach of all of the cache. */
static bool movable(const struct gb_patch_in *in, const struct gb_insn *gi)
{
	if (!gb_jit__nostop_supported(gi))
		return false;
	for (unsigned k = 0; k < gi->zi.operand_count; k++) {
		const ZydisDecodedOperand *o = &gi->ops[k];
		uint64_t next = gi->pc + gi->len, to;
		if (o->type == ZYDIS_OPERAND_TYPE_MEMORY && o->mem.base == ZYDIS_REGISTER_RIP)
			to = next + (uint64_t)o->mem.disp.value;
		else if (o->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && o->imm.is_relative)
			to = next + (uint64_t)o->imm.value.s;
		else
			continue;
		if (!gb_emit_reach32(in->cache_lo, in->cache_hi, to))
			return false;
	}
	return true;
}

static bool writable(const struct gb_patch_in *in, uint64_t lo, uint64_t hi)
{
	for (uint64_t a = lo; a < hi;) {
		size_t i = GB_UPPER(in->maps, in->nmaps, lo, a);
		if (!i || a >= in->maps[i - 1].hi || in->maps[i - 1].writable)
			return true;
		a = in->maps[i - 1].hi;
	}
	return false;
}

/* Where code of the range running natively from its original bytes may
 * go: the in-range targets of its direct branches and calls (one pass over
 * the decode) and the known code addresses; ascending, *n of them. */
static uint64_t *native_targets(const struct gb_patch_in *in, size_t *n)
{
	uint64_t *v = malloc((in->ninsns + in->ncodeptrs + 1) * sizeof(*v));
	*n = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < in->ninsns; i++) {
		const struct gb_insn *gi = &in->insns[i];
		for (unsigned k = 0; k < gi->zi.operand_count; k++) {
			const ZydisDecodedOperand *o = &gi->ops[k];
			if (o->type != ZYDIS_OPERAND_TYPE_IMMEDIATE || !o->imm.is_relative)
				continue;
			uint64_t to = gi->pc + gi->len + (uint64_t)o->imm.value.s;
			if (to >= in->start && to <= in->end)
				v[(*n)++] = to;
		}
	}
	for (size_t i = 0; i < in->ncodeptrs; i++)
		v[(*n)++] = in->codeptrs[i];
	qsort(v, *n, sizeof(*v), gb_cmp_u64);
	return v;
}

static bool target_inside(const uint64_t *t, size_t nt, uint64_t a)
{
	size_t i = GB_UPPER_U64(t, nt, a); /* the first > a */
	return i < nt && t[i] < a + GB_PATCH_LEN;
}

static void plan_one(const struct gb_patch_in *in, size_t e, const uint64_t *t, size_t nt,
		     struct gb_patch *p)
{
	uint64_t a = in->entries[e], hi = a + GB_PATCH_LEN;
	memset(p, 0, sizeof(*p));
	p->addr = a;
	size_t i = GB_LOWER(in->insns, in->ninsns, pc, a);
	if (i == in->ninsns || in->insns[i].pc != a) {
		p->why = GB_PATCH_NOT_INSN;
		return;
	}
	if (hi - 1 > in->end) {
		p->why = GB_PATCH_SHORT;
		return;
	}
	if (e + 1 < in->nentries && in->entries[e + 1] < hi) {
		p->why = GB_PATCH_ENTRY_INSIDE;
		return;
	}
	if (target_inside(t, nt, a)) {
		p->why = GB_PATCH_TARGET_INSIDE;
		return;
	}
	if (writable(in, a, hi)) {
		p->why = GB_PATCH_WRITABLE;
		return;
	}
	if (!gb_emit_reach32(in->cache_lo, in->cache_hi, a)) {
		p->why = GB_PATCH_FAR;
		return;
	}
	uint64_t at = a;
	for (size_t k = i; k < in->ninsns && at < hi; k++) {
		const struct gb_insn *gi = &in->insns[k];
		if (gi->pc != at || !movable(in, gi)) { /* a hole in the decode, or stays */
			p->why = GB_PATCH_CANNOT_MOVE;
			return;
		}
		for (unsigned b = 0; b < gi->len && at + b < hi; b++)
			p->orig[at + b - a] = gi->bytes[b];
		p->insn[p->ninsns++] = gi->pc;
		at += gi->len;
	}
	if (at < hi) {
		p->why = GB_PATCH_SHORT;
		return;
	}
	/* Without gebpf (live.c) a thread goes on natively at the end of a
	 * system call of the range: not inside the 5 bytes, which hold the
	 * jump's tail. */
	for (unsigned k = 0; k + 1 < p->ninsns; k++)
		if (in->insns[i + k].zi.mnemonic == ZYDIS_MNEMONIC_SYSCALL) {
			p->why = GB_PATCH_SYSCALL_INSIDE;
			return;
		}
	/* ... and at an entry, from the copy of the instructions the patch
	 * covers (owner.c): they must run from one (reloc.h). */
	if (in->need_native && !gb_reloc_ok(&in->insns[i], p->ninsns, in->cache_lo, in->cache_hi))
		p->why = GB_PATCH_NO_NATIVE;
}

int gb_patch_plan(const struct gb_patch_in *in, struct gb_patch_plan *out)
{
	size_t nt;
	uint64_t *t = native_targets(in, &nt);
	out->n = 0;
	out->v = calloc(in->nentries ? in->nentries : 1, sizeof(*out->v));
	if (!out->v || !t) {
		free(out->v);
		out->v = NULL;
		free(t);
		return -ENOMEM;
	}
	for (size_t e = 0; e < in->nentries; e++)
		plan_one(in, e, t, nt, &out->v[out->n++]);
	free(t);
	return 0;
}

void gb_patch_plan_free(struct gb_patch_plan *pl)
{
	free(pl->v);
	pl->v = NULL;
	pl->n = 0;
}

int gb_patch_set_target(struct gb_patch *p, uint64_t target)
{
	int64_t rel = (int64_t)(target - (p->addr + GB_PATCH_LEN));
	if (rel < INT32_MIN || rel > INT32_MAX)
		return -ERANGE;
	int32_t r32 = (int32_t)rel;
	p->bytes[0] = 0xe9;
	memcpy(p->bytes + 1, &r32, 4);
	return 0;
}

const struct gb_patch *gb_patch_inside(const struct gb_patch_plan *pl, uint64_t addr,
				       uint64_t *boundary)
{
	size_t i = GB_UPPER(pl->v, pl->n, addr, addr);
	if (!i)
		return NULL;
	const struct gb_patch *p = &pl->v[i - 1];
	if (p->why != GB_PATCH_OK || addr <= p->addr || addr >= p->addr + GB_PATCH_LEN)
		return NULL;
	for (unsigned k = p->ninsns; k-- > 0;)
		if (p->insn[k] <= addr) {
			*boundary = p->insn[k];
			return p;
		}
	return NULL;
}

void gb_patch_unpatched(const struct gb_patch_plan *pl, uint64_t addr, uint8_t *buf, size_t n)
{
	for (size_t i = 0; i < pl->n; i++) {
		const struct gb_patch *p = &pl->v[i];
		if (p->why != GB_PATCH_OK)
			continue;
		for (unsigned k = 0; k < GB_PATCH_LEN; k++)
			if (p->addr + k >= addr && p->addr + k < addr + n)
				buf[p->addr + k - addr] = p->orig[k];
	}
}

const char *gb_patch_why_str(int why)
{
	static const char *s[] = {
		[GB_PATCH_OK] = "patched",
		[GB_PATCH_ENTRY_INSIDE] = "another entry inside its 5 bytes",
		[GB_PATCH_CANNOT_MOVE] = "an instruction under its 5 bytes cannot move to the cache",
		[GB_PATCH_WRITABLE] = "writable code",
		[GB_PATCH_SHORT] = "the range ends inside its 5 bytes",
		[GB_PATCH_FAR] = "the cache is out of reach",
		[GB_PATCH_NOT_INSN] = "not an instruction start of the range",
		[GB_PATCH_TARGET_INSIDE] = "a branch target or code address of the range inside its 5 bytes",
		[GB_PATCH_SYSCALL_INSIDE] = "a system call returns inside its 5 bytes",
		[GB_PATCH_NO_NATIVE] = "its instructions cannot run from a copy (no way on without gebpf)",
	};
	return why >= 0 && why < (int)(sizeof(s) / sizeof(s[0])) ? s[why] : "?";
}
