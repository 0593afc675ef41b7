/* One translated instruction's pieces, which jit.c's blocks are made of
 * and popf.c's check and rep.c's loop use too: an instruction's
 * instrumentation, and an exit stub.  Layout of one translated instruction
 * (A, B: two registers its addresses do not use; the slots are in the data
 * part):
 *
 *   mov [slot A], A ; mov [slot B], B     save
 *   mov A, [head]
 *   mov qword [A], id                     record: the instruction's id
 *   lea B, [address k] ; mov [A+8+8k], B  ... and each run-time address
 *   lea A, [A + 8*words] ; mov [head], A  commit
 *   mov B, [slot B] ; mov A, [slot A]     restore
 *   <the instruction>                     (a jcc/jmp: to a block or a stub)
 */
#include <string.h>

#include "common/grow.h"
#include "decode/plan.h"
#include "jit/emit.h"
#include "jit/internal.h"

/* An exit stub to target; src: the rel32 field jumping here (re-pointed at
 * a block for target once it is translated), or UINT32_MAX. */
uint64_t jit_stub(struct gb_jit *j, uint64_t target, uint32_t src, uint8_t emu_words)
{
	uint64_t at = gb_emit_here(&j->em);
	struct unit *u = jit_unit_add(j, U_STUB, target);
	if (!u)
		return 0;
	u->emu = emu_words != 0;
	u->words = emu_words;
	gb_emit_store(&j->em, daddr(j, SLOT(GB_REG_RAX)), GB_REG_RAX);
	gb_emit_store(&j->em, daddr(j, SLOT(GB_REG_RCX)), GB_REG_RCX);
	gb_emit_store(&j->em, daddr(j, SLOT(GB_REG_R11)), GB_REG_R11);
	if (j->o.nostop && inside(j, target)) { /* counted and logged (the lock held) */
		gb_emit_mov_imm64(&j->em, GB_REG_RCX, target);
		ns_log_miss(j, GB_REG_R11);
	}
	gb_emit_mov_imm32(&j->em, GB_REG_RAX, 39 /* getpid */);
	gb_emit_syscall(&j->em);
	u->o_insn = (uint32_t)j->em.used;
	gb_emit_load(&j->em, GB_REG_RAX, daddr(j, SLOT(GB_REG_RAX)));
	gb_emit_load(&j->em, GB_REG_RCX, daddr(j, SLOT(GB_REG_RCX)));
	gb_emit_load(&j->em, GB_REG_R11, daddr(j, SLOT(GB_REG_R11)));
	if (j->o.nostop) /* nobody there: on natively, the range left */
		ns_leave(j, target);
	else
		gb_emit_jump(&j->em, ZYDIS_MNEMONIC_JMP, target);
	jit_unit_end(j, u);
	j->stats.stubs++;
	if (src != UINT32_MAX && target >= j->start && target <= j->end) {
		if (GB_GROW(&j->st, &j->stcap, j->nst + 1))
			return 0;
		j->st[j->nst++] = (struct stub){ target, src };
	}
	return at;
}

static uint32_t pick_scratch(const struct gb_plan *p, unsigned not, unsigned not2)
{
	static const uint8_t order[] = { GB_REG_RAX, GB_REG_RCX, GB_REG_RDX, GB_REG_RBX, GB_REG_RSI,
					 GB_REG_RDI, GB_REG_R8, GB_REG_R9, GB_REG_R10, GB_REG_R11 };
	for (size_t k = 0; k < sizeof(order); k++) {
		unsigned r = order[k];
		bool used = r == not || r == not2 || (p->kind == GB_PLAN_BT && r == p->reg);
		for (unsigned i = 0; i < p->nrefs; i++)
			used |= p->refs[i].base == r || p->refs[i].index == r;
		if (!used)
			return r;
	}
	return GB_REG_NONE;
}

/* enter N, L as templates (access.c's enter(): push rbp, the L-1 frame
 * pointers read from the old frame and pushed, the new one pushed), for
 * L <= ENTER_LEVELS (6 references at most). */
static void enter_refs(const struct gb_plan *e, struct gb_plan *q)
{
	int64_t w = e->elem;
	unsigned n = 0;
	memset(q, 0, sizeof(*q));
	q->kind = GB_PLAN_REFS;
	q->refs[n++] = (struct gb_memref){ -w, (uint32_t)w, GB_REG_RSP, GB_REG_NONE, 0, GB_REF_WRITE };
	for (unsigned i = 1; e->level && i < e->level; i++) {
		q->refs[n++] = (struct gb_memref){ -(int64_t)i * w, (uint32_t)w, GB_REG_RBP, GB_REG_NONE, 0, 0 };
		q->refs[n++] = (struct gb_memref){ -w - (int64_t)i * w, (uint32_t)w, GB_REG_RSP, GB_REG_NONE,
						   0, GB_REF_WRITE };
	}
	if (e->level)
		q->refs[n++] = (struct gb_memref){ -w - (int64_t)e->level * w, (uint32_t)w, GB_REG_RSP,
						   GB_REG_NONE, 0, GB_REF_WRITE };
	q->nrefs = (uint8_t)n;
}

/* The instrumentation of one instruction (its copy is the caller's): see
 * internal.h.  Returns its id, or -1. */
int jit_one(struct gb_jit *j, const struct gb_insn *gi, bool norefs)
{
	const struct gb_plan *p = &gi->plan;
	struct gb_plan enter;
	if (p->kind == GB_PLAN_ENTER) {
		if (p->level > ENTER_LEVELS)
			return -1;
		enter_refs(p, &enter);
		p = &enter;
	}
	if (GB_GROW(&j->in, &j->incap, j->nin + 1))
		return -1;
	struct insn *in = &j->in[j->nin];
	memset(in, 0, sizeof(*in));
	in->pc = gi->pc;
	in->len = gi->len;
	memcpy(in->bytes, gi->bytes, gi->len);
	j->lo = gi->pc < j->lo ? gi->pc : j->lo;
	j->hi = gi->pc + gi->len > j->hi ? gi->pc + gi->len : j->hi;
	unsigned nrt = 0;
	if (p->kind == GB_PLAN_BT)
		in->bt_bits = p->reg_bits;
	if (p->kind != GB_PLAN_NONE && !norefs) {
		in->nrefs = p->nrefs;
		for (unsigned k = 0; k < p->nrefs; k++) {
			const struct gb_memref *r = &p->refs[k];
			in->refs[k] = (struct ref){ r->disp, r->size, r->flags,
						    r->base != GB_REG_NONE || r->index != GB_REG_NONE };
			nrt += in->refs[k].rt;
		}
	}
	if ((p->kind == GB_PLAN_VSIB || p->kind == GB_PLAN_MASKED) && !p->kreg && !norefs) {
		unsigned ib = p->kind == GB_PLAN_VSIB ? p->nelem * p->idx_elem : 0, mb = p->nelem * p->elem;
		in->vkind = p->kind;
		in->nelem = p->nelem;
		in->elem = p->elem;
		in->idx_elem = p->idx_elem;
		in->scale = p->refs[0].scale;
		in->ibytes = (uint8_t)(!ib ? 0 : ib > 16 ? 32 : 16);
		in->mbytes = (uint8_t)(mb > 16 ? 32 : 16);
	}
	if ((p->kind == GB_PLAN_MASKED || p->kind == GB_PLAN_COMPRESS) && p->kreg && !norefs) {
		in->vkind = p->kind;   /* (the opmask's word after the address) */
		in->nelem = p->nelem;
		in->elem = p->elem;
		in->kreg = p->kreg;
		in->kmap = p->map;
		in->lanes = p->lanes;
	}
	unsigned vwords = (in->ibytes + in->mbytes) / 8 + !!in->kreg;
	/* --values (vals.c): the value words after the addresses; the reads'
	 * values are taken through B and C */
	unsigned vw = j->o.values && !norefs ? jit_vals_words(gi) : 0;
	bool need_c = false;
	for (unsigned k = 0; vw && k < p->nrefs; k++)
		need_c |= !(p->refs[k].flags & GB_REF_WRITE);
	bool need_b = nrt || in->kreg || need_c;
	unsigned a = pick_scratch(p, GB_REG_NONE, GB_REG_NONE);
	unsigned b = need_b ? pick_scratch(p, a, GB_REG_NONE) : GB_REG_NONE;
	unsigned c = need_c ? pick_scratch(p, a, b) : GB_REG_NONE;
	if (a == GB_REG_NONE || (need_b && b == GB_REG_NONE) || (need_c && c == GB_REG_NONE))
		return -1;
	uint32_t id = (uint32_t)j->nin;
	struct unit *u = jit_unit_add(j, U_INSN, gi->pc);
	if (!u)
		return -1;
	u->id = id;
	u->a = (uint8_t)a;
	u->b = (uint8_t)b;
	u->c = (uint8_t)c;
	u->words = (uint8_t)(1 + nrt + !!in->bt_bits + vwords + vw);
	in->words = u->words;
	if (vw) {
		in->vat = (uint8_t)(1 + nrt + !!in->bt_bits + vwords);
		in->emu = gb_jit__emulated(gi);
		in->vdone = jit_vals_has_post(gi) ? (uint8_t)(u->words - 1) : 0;
	}
	gb_emit_store(&j->em, daddr(j, SLOT(a)), a);
	u->o_b = (uint32_t)j->em.used;
	if (need_b)
		gb_emit_store(&j->em, daddr(j, SLOT(b)), b);
	u->o_c = (uint32_t)j->em.used;
	if (need_c)
		gb_emit_store(&j->em, daddr(j, SLOT(c)), c);
	u->o_load = (uint32_t)j->em.used;
	gb_emit_load(&j->em, a, daddr(j, HEAD));
	gb_emit_store_imm(&j->em, a, 0, (int32_t)id);
	unsigned w = 1;
	if (in->bt_bits) /* the bit offset: the consumer finds the unit holding the bit */
		gb_emit_store_reg(&j->em, a, (int32_t)(8 * w++), p->reg);
	for (unsigned k = 0; k < in->nrefs; k++) {
		const struct gb_memref *r = &p->refs[k];
		if (!in->refs[k].rt)
			continue;
		gb_emit_lea(&j->em, b, r->base, r->index, r->scale, r->disp);
		gb_emit_store_reg(&j->em, a, (int32_t)(8 * w++), b);
	}
	if (in->ibytes) { /* the index vector, then the mask vector */
		gb_emit_store_vec(&j->em, a, (int32_t)(8 * w), p->vreg, in->ibytes);
		w += in->ibytes / 8;
	}
	if (in->mbytes) {
		gb_emit_store_vec(&j->em, a, (int32_t)(8 * w), p->mreg, in->mbytes);
		w += in->mbytes / 8;
	}
	if (in->kreg) { /* the opmask, before the instruction runs */
		gb_emit_kmov(&j->em, b, in->kreg, __builtin_cpu_supports("avx512bw"));
		gb_emit_store_reg(&j->em, a, (int32_t)(8 * w++), b);
	}
	w += vw; /* (the values' words: vals.c fills them) */
	gb_emit_lea(&j->em, a, a, GB_REG_NONE, 0, 8 * (int64_t)w);
	gb_emit_store(&j->em, daddr(j, HEAD), a);
	u->o_commit = (uint32_t)j->em.used;
	u->o_pre = (uint32_t)j->em.used;
	if (vw)
		jit_vals_pre(j, gi, in, a, b, c);
	u->o_pre_end = (uint32_t)j->em.used;
	if (need_c)
		gb_emit_load(&j->em, c, daddr(j, SLOT(c)));
	if (need_b)
		gb_emit_load(&j->em, b, daddr(j, SLOT(b)));
	gb_emit_load(&j->em, a, daddr(j, SLOT(a)));
	u->o_insn = (uint32_t)j->em.used;
	j->nin++;
	j->stats.insns++;
	return (int)id;
}
