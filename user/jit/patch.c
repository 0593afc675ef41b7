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

/* Is one of the sorted t strictly inside [a, a + len)? */
static bool target_inside(const uint64_t *t, size_t nt, uint64_t a, unsigned len)
{
	size_t i = GB_UPPER_U64(t, nt, a); /* the first > a */
	return i < nt && t[i] < a + len;
}

/* A jump of len bytes at entry e (instruction i of the decode): OK with
 * p's instructions and original bytes filled in, or why not. */
static int cover(const struct gb_patch_in *in, size_t e, size_t i, unsigned len,
		 const uint64_t *t, size_t nt, struct gb_patch *p)
{
	uint64_t a = in->entries[e], hi = a + len;
	bool full = len == GB_PATCH_LEN;
	p->ninsns = 0;
	if (hi - 1 > in->end)
		return GB_PATCH_SHORT;
	if (e + 1 < in->nentries && in->entries[e + 1] < hi)
		return full ? GB_PATCH_ENTRY_INSIDE : GB_PATCH_SHORT_INSIDE;
	if (target_inside(t, nt, a, len))
		return full ? GB_PATCH_TARGET_INSIDE : GB_PATCH_SHORT_INSIDE;
	if (writable(in, a, hi))
		return GB_PATCH_WRITABLE;
	if (!gb_emit_reach32(in->cache_lo, in->cache_hi, a))
		return GB_PATCH_FAR; /* (a trampoline is as far: within 126 bytes) */
	uint64_t at = a;
	for (size_t k = i; k < in->ninsns && at < hi; k++) {
		const struct gb_insn *gi = &in->insns[k];
		if (gi->pc != at || !movable(in, gi)) /* a hole in the decode, or stays */
			return GB_PATCH_CANNOT_MOVE;
		for (unsigned b = 0; b < gi->len && at + b < hi; b++)
			p->orig[at + b - a] = gi->bytes[b];
		p->insn[p->ninsns++] = gi->pc;
		at += gi->len;
	}
	if (at < hi)
		return GB_PATCH_SHORT;
	/* Without gebpf (live.c) a thread goes on natively at the end of a
	 * system call of the range: not inside the jump's bytes, which hold
	 * its tail. */
	for (unsigned k = 0; k + 1 < p->ninsns; k++)
		if (in->insns[i + k].zi.mnemonic == ZYDIS_MNEMONIC_SYSCALL)
			return GB_PATCH_SYSCALL_INSIDE;
	/* ... and at an entry, from the copy of the instructions the patch
	 * covers (owner.c): they must run from one (reloc.h). */
	if (in->need_native && !gb_reloc_ok(&in->insns[i], p->ninsns, in->cache_lo, in->cache_hi))
		return GB_PATCH_NO_NATIVE;
	return GB_PATCH_OK;
}

/* The nops that fall into entry a (instruction i of the decode; patch.h):
 * their instruction boundaries, ascending, in b (at most PAD_MAX, none
 * farther than GB_PATCH_PAD_MAX before a); their count.  From the decode
 * inside the range, then, when they reach its start, from the bytes before
 * it (in->pre: decoded from in->pre_lo, a boundary). */
#define PAD_MAX 64

static bool is_nop(const struct gb_insn *gi)
{
	return gi->zi.mnemonic == ZYDIS_MNEMONIC_NOP;
}

static size_t pad_before(const struct gb_patch_in *in, size_t i, uint64_t a, uint64_t *b)
{
	uint64_t down[PAD_MAX];
	size_t n = 0, m = 0, k = i;
	uint64_t first = a;
	while (k > 0 && n < PAD_MAX) {
		const struct gb_insn *gi = &in->insns[k - 1];
		if (gi->pc + gi->len != first || !is_nop(gi) || a - gi->pc > GB_PATCH_PAD_MAX)
			break;
		down[n++] = first = gi->pc;
		k--;
	}
	if (first == in->start && k == 0 && in->npre && in->pre_lo < in->start) {
		uint64_t pc = in->pre_lo;
		while (pc < in->start) {
			struct gb_insn gi;
			size_t off = (size_t)(pc - in->pre_lo);
			if (gb_decode(pc, in->pre + off, in->npre - off, &gi) || pc + gi.len > in->start)
				break;
			if (!is_nop(&gi))
				m = 0; /* (the nops after the last other instruction) */
			else if (m < PAD_MAX && a - pc <= GB_PATCH_PAD_MAX)
				b[m++] = pc;
			pc += gi.len;
		}
		if (pc != in->start)
			m = 0; /* (a decode that does not end at the start) */
	}
	while (n > 0 && m < PAD_MAX)
		b[m++] = down[--n];
	return m;
}

/* The original byte at pc, of the range or of the bytes before it. */
static uint8_t byte_at(const struct gb_patch_in *in, uint64_t pc)
{
	if (pc < in->start)
		return in->pre[pc - in->pre_lo];
	size_t i = GB_UPPER(in->insns, in->ninsns, pc, pc);
	const struct gb_insn *gi = &in->insns[i - 1];
	return gi->bytes[pc - gi->pc];
}

/* A 2-byte jump at entry e (instruction i) to a trampoline in the nops
 * before it: the trampoline nearest the entry whose 5 bytes nothing else
 * reaches (no entry, no target, no other patch, a page that is not
 * writable, the cache within a rel32's reach); OK, or why not. */
static int plan_short(const struct gb_patch_in *in, size_t e, size_t i, const uint64_t *t,
		      size_t nt, const struct gb_patch_plan *done, struct gb_patch *p)
{
	uint64_t a = in->entries[e], b[PAD_MAX];
	int why = cover(in, e, i, GB_PATCH_SHORT_LEN, t, nt, p);
	if (why != GB_PATCH_OK)
		return why;
	size_t n = pad_before(in, i, a, b);
	for (size_t k = n; k-- > 0;) {
		uint64_t at = b[k];
		if (at + GB_PATCH_LEN > a || a - at > GB_PATCH_PAD_MAX)
			continue;
		size_t ei = GB_LOWER_U64(in->entries, in->nentries, at); /* the first >= at */
		bool busy = (ei < in->nentries && in->entries[ei] < at + GB_PATCH_LEN) ||
			    target_inside(t, nt, at, GB_PATCH_LEN) || writable(in, at, at + GB_PATCH_LEN) ||
			    !gb_emit_reach32(in->cache_lo, in->cache_hi, at);
		for (size_t d = 0; !busy && d < done->n; d++) {
			const struct gb_patch *q = &done->v[d];
			busy = q->why == GB_PATCH_OK &&
			       ((q->addr < at + GB_PATCH_LEN && at < q->addr + q->len) ||
				(q->tramp && q->tramp < at + GB_PATCH_LEN && at < q->tramp + GB_PATCH_LEN));
		}
		if (busy)
			continue;
		p->tramp = at;
		for (unsigned j = 0; j < GB_PATCH_LEN; j++)
			p->tramp_orig[j] = byte_at(in, at + j);
		return GB_PATCH_OK;
	}
	return GB_PATCH_NO_PAD;
}

static void plan_one(const struct gb_patch_in *in, size_t e, const uint64_t *t, size_t nt,
		     const struct gb_patch_plan *done, struct gb_patch *p)
{
	uint64_t a = in->entries[e];
	memset(p, 0, sizeof(*p));
	p->addr = a;
	p->len = GB_PATCH_LEN;
	size_t i = GB_LOWER(in->insns, in->ninsns, pc, a);
	if (i == in->ninsns || in->insns[i].pc != a) {
		p->why = GB_PATCH_NOT_INSN;
		return;
	}
	p->why = (uint8_t)cover(in, e, i, GB_PATCH_LEN, t, nt, p);
	switch (p->why) {
	case GB_PATCH_ENTRY_INSIDE: case GB_PATCH_TARGET_INSIDE: case GB_PATCH_SHORT:
	case GB_PATCH_CANNOT_MOVE: case GB_PATCH_SYSCALL_INSIDE: case GB_PATCH_NO_NATIVE:
		break; /* (what 2 bytes may not meet) */
	default:
		return;
	}
	struct gb_patch q;
	memset(&q, 0, sizeof(q));
	q.addr = a;
	q.len = GB_PATCH_SHORT_LEN;
	int why = plan_short(in, e, i, t, nt, done, &q);
	if (why == GB_PATCH_OK) {
		q.why_other = p->why;
		*p = q;
	} else {
		p->why_other = (uint8_t)why;
	}
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
	for (size_t e = 0; e < in->nentries; e++) {
		plan_one(in, e, t, nt, out, &out->v[out->n]);
		out->n++;
	}
	free(t);
	return 0;
}

void gb_patch_plan_free(struct gb_patch_plan *pl)
{
	free(pl->v);
	pl->v = NULL;
	pl->n = 0;
}

/* jmp rel32 from at to target, in b: 0, or -ERANGE. */
static int jmp32(uint8_t *b, uint64_t at, uint64_t target)
{
	int64_t rel = (int64_t)(target - (at + GB_PATCH_LEN));
	if (rel < INT32_MIN || rel > INT32_MAX)
		return -ERANGE;
	int32_t r32 = (int32_t)rel;
	b[0] = 0xe9;
	memcpy(b + 1, &r32, 4);
	return 0;
}

int gb_patch_set_target(struct gb_patch *p, uint64_t target)
{
	if (p->len != GB_PATCH_SHORT_LEN)
		return jmp32(p->bytes, p->addr, target);
	int64_t rel = (int64_t)(p->tramp - (p->addr + GB_PATCH_SHORT_LEN));
	if (!p->tramp || rel < INT8_MIN || rel > INT8_MAX)
		return -ERANGE;
	memcpy(p->bytes, p->orig, GB_PATCH_LEN);
	p->bytes[0] = 0xeb;
	p->bytes[1] = (uint8_t)(int8_t)rel;
	return jmp32(p->tramp_bytes, p->tramp, target);
}

const struct gb_patch *gb_patch_inside(const struct gb_patch_plan *pl, uint64_t addr,
				       uint64_t *boundary)
{
	size_t i = GB_UPPER(pl->v, pl->n, addr, addr);
	/* a trampoline's nops: its entry is after it, within GB_PATCH_PAD_MAX */
	for (size_t k = i; k < pl->n && pl->v[k].addr - addr <= GB_PATCH_PAD_MAX; k++) {
		const struct gb_patch *q = &pl->v[k];
		if (q->why == GB_PATCH_OK && q->tramp && addr > q->tramp &&
		    addr < q->tramp + GB_PATCH_LEN) {
			*boundary = q->addr;
			return q;
		}
	}
	if (!i)
		return NULL;
	const struct gb_patch *p = &pl->v[i - 1];
	if (p->why != GB_PATCH_OK || addr <= p->addr || addr >= p->addr + p->len)
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
		for (unsigned k = 0; k < p->len; k++)
			if (p->addr + k >= addr && p->addr + k < addr + n)
				buf[p->addr + k - addr] = p->orig[k];
		for (unsigned k = 0; p->tramp && k < GB_PATCH_LEN; k++)
			if (p->tramp + k >= addr && p->tramp + k < addr + n)
				buf[p->tramp + k - addr] = p->tramp_orig[k];
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
		[GB_PATCH_NO_PAD] = "no 5 bytes of nops before it, within a short jump's reach, for a "
				    "trampoline",
		[GB_PATCH_SHORT_INSIDE] = "another entry or a branch target at +1, inside a short jump",
	};
	return why >= 0 && why < (int)(sizeof(s) / sizeof(s[0])) ? s[why] : "?";
}
