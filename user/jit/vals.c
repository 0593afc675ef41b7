/* --values in the code cache (gb_jit_opts.values; the mode with stops;
 * docs/trace-format.md "Values"): a translated instruction's record also
 * holds the values its accesses read and wrote and the registers it wrote,
 * so that a stretch run in the cache gives the step engine's lines.
 *
 * The record's words: id and addresses (insn.c), then from vat each
 * reference's value (its size in whole words, in the references' order),
 * each written register's (decode/written.h's order: a general register,
 * eflags, mxcsr or k one word, xmm two, ymm four, zmm eight) and last the
 * done word (vdone).  eflags' word is rax after `lahf; seto al`: OF in
 * byte 0, SF ZF AF PF CF in byte 1 (the consumer puts them over the flags it
 * knew: nothing the cache takes changes another flag but cld and std,
 * whose DF Zydis gives as set).
 *
 *   U_INSN, after the commit (A: the record's end; B, C saved):
 *     mov qword [A+done], 0
 *     per read: lea B, [ref] ; mov C, seg:[B+8k] ; mov [A+val+8k], C ...
 *   <the instruction>
 *   U_POST (pc: the next instruction; A', B', C' none of its registers):
 *     save A', B', C' (and rax, for the flags) ; mov A', [head]
 *     per write: mov B', [A'+address] ; mov C', seg:[B'+8k] ; mov [A'+val+8k], C' ...
 *     per register: mov [A'+val], r ; movdqu / vmovdqu / vmovdqu64 ;
 *                   kmov C', k ; mov [A'+val], C' ; stmxcsr [A'+val]
 *     the flags: lahf ; seto al ; mov [A'+val], rax
 *     mov qword [A'+done], 1 ; restore
 *
 * A read's value is taken before the instruction, so a load there may
 * fault where the instruction would (locate.c: the fault is the
 * instruction's); a write's and the registers after it.  A thread stopped
 * before the done word is 1 has its values taken by gebpf from the thread
 * (ejit.c), as are those of the instructions gebpf performs (call, ret,
 * indirect jmp: their records have no done word).
 */
#include <errno.h>

#include "decode/written.h"
#include "jit/emit.h"
#include "jit/internal.h"

static unsigned wd(unsigned bytes) { return (bytes + 7) / 8; }

static bool size_ok(uint32_t s)
{
	return s == 1 || s == 2 || s == 4 || s == 8 || s == 16 || s == 32 || s == 64;
}

static bool reg_ok(const struct gb_wreg *w)
{
	switch (w->kind) {
	case GB_WR_GPR: case GB_WR_EFLAGS: case GB_WR_MXCSR: case GB_WR_XMM: case GB_WR_YMM:
	case GB_WR_ZMM: case GB_WR_K:
		return true;
	default:
		return false; /* x87, segment bases: stepped */
	}
}

/* Straight-line: the cache runs its copy and goes on after it. */
static bool has_post(const struct gb_insn *gi, int nw)
{
	if (gb_jit__emulated(gi) || (gi->flags & GB_INSN_BRANCH))
		return false;
	bool w = nw > 0;
	for (unsigned k = 0; k < gi->plan.nrefs; k++)
		w |= (gi->plan.refs[k].flags & GB_REF_WRITE) != 0;
	return w;
}

static unsigned words(const struct gb_insn *gi, const struct gb_wreg *w, int nw)
{
	unsigned n = 0;
	for (unsigned k = 0; k < gi->plan.nrefs; k++)
		n += wd(gi->plan.refs[k].size);
	for (int k = 0; k < nw; k++)
		n += wd(gb_wreg_size(&w[k]));
	return n + has_post(gi, nw);
}

bool jit_vals_ok(const struct gb_insn *gi)
{
	const struct gb_plan *p = &gi->plan;
	if (gb_insn_writes_all(gi))
		return false;
	if (p->kind != GB_PLAN_NONE && p->kind != GB_PLAN_REFS &&
	    !(p->kind == GB_PLAN_STRING && !p->reg_bits))
		return false;
	for (unsigned k = 0; k < p->nrefs; k++)
		if (!size_ok(p->refs[k].size) || (p->refs[k].flags & (GB_REF_ADDR32 | GB_REF_INDEX_AL)))
			return false;
	struct gb_wreg w[GB_WREG_MAX];
	int nw = gb_insn_written(gi, w, GB_WREG_MAX);
	for (int k = 0; k < nw; k++) {
		if (!reg_ok(&w[k]))
			return false;
		if (w[k].kind == GB_WR_EFLAGS && gi->zi.cpu_flags &&
		    ((gi->zi.cpu_flags->modified | gi->zi.cpu_flags->undefined) & ~0x8d5u))
			return false; /* (popf and the like: stepped anyway) */
	}
	return words(gi, w, nw) <= VALS_MAX_WORDS;
}

bool jit_vals_has_post(const struct gb_insn *gi)
{
	struct gb_wreg w[GB_WREG_MAX];
	return has_post(gi, gb_insn_written(gi, w, GB_WREG_MAX));
}

unsigned jit_vals_words(const struct gb_insn *gi)
{
	struct gb_wreg w[GB_WREG_MAX];
	int nw = gb_insn_written(gi, w, GB_WREG_MAX);
	return words(gi, w, nw);
}

static unsigned seg_of(uint8_t flags)
{
	return flags & GB_REF_FS ? GB_EMIT_SEG_FS : flags & GB_REF_GS ? GB_EMIT_SEG_GS : GB_EMIT_SEG_NONE;
}

/* size bytes at seg:[b] into the record at [a+disp], through c. */
static void copy_value(struct gb_emit *m, unsigned a, int32_t disp, unsigned b, unsigned c,
		       uint32_t size, unsigned seg)
{
	for (uint32_t o = 0; o < size; o += 8) {
		gb_emit_load_mem(m, c, b, (int32_t)o, size < 8 ? size : 8, seg);
		gb_emit_store_reg(m, a, disp + (int32_t)o, c);
	}
}

void jit_vals_pre(struct gb_jit *j, const struct gb_insn *gi, const struct insn *in, unsigned a,
		  unsigned b, unsigned c)
{
	const struct gb_plan *p = &gi->plan;
	int32_t rec = -8 * (int32_t)in->words; /* the record's start, from A */
	if (in->vdone)
		gb_emit_store_imm(&j->em, a, rec + 8 * in->vdone, 0);
	unsigned at = in->vat;
	for (unsigned k = 0; k < p->nrefs; k++) {
		const struct gb_memref *r = &p->refs[k];
		if (!(r->flags & GB_REF_WRITE)) {
			if (r->base != GB_REG_NONE || r->index != GB_REG_NONE)
				gb_emit_lea(&j->em, b, r->base, r->index, r->scale, r->disp);
			else
				gb_emit_mov_imm64(&j->em, b, (uint64_t)r->disp);
			copy_value(&j->em, a, rec + 8 * (int32_t)at, b, c, r->size, seg_of(r->flags));
		}
		at += wd(r->size);
	}
}

/* A scratch register of the part after: none of the instruction's
 * general registers, nor rax (the flags'), nor one taken already. */
static unsigned post_scratch(const struct gb_wreg *w, int nw, unsigned x, unsigned y)
{
	static const uint8_t order[] = { GB_REG_RCX, GB_REG_RDX, GB_REG_RBX, GB_REG_RSI, GB_REG_RDI,
					 GB_REG_R8, GB_REG_R9, GB_REG_R10, GB_REG_R11, GB_REG_R12,
					 GB_REG_R13, GB_REG_R14, GB_REG_R15 };
	for (size_t k = 0; k < sizeof(order); k++) {
		unsigned r = order[k];
		bool used = r == x || r == y;
		for (int i = 0; i < nw; i++)
			used |= w[i].kind == GB_WR_GPR && w[i].num == r;
		if (!used)
			return r;
	}
	return GB_REG_NONE;
}

void jit_vals_post(struct gb_jit *j, const struct gb_insn *gi, const struct insn *in)
{
	if (!in->vdone)
		return;
	struct gb_emit *m = &j->em;
	const struct gb_plan *p = &gi->plan;
	struct gb_wreg w[GB_WREG_MAX];
	int nw = gb_insn_written(gi, w, GB_WREG_MAX);
	unsigned a = post_scratch(w, nw, GB_REG_NONE, GB_REG_NONE);
	unsigned b = post_scratch(w, nw, a, GB_REG_NONE);
	unsigned c = post_scratch(w, nw, a, b);
	bool flags = false;
	for (int k = 0; k < nw; k++)
		flags |= w[k].kind == GB_WR_EFLAGS;
	if (c == GB_REG_NONE) {
		m->err = m->err ? m->err : -EINVAL;
		return;
	}
	struct unit *u = jit_unit_add(j, U_POST, gi->pc + gi->len);
	if (!u)
		return;
	u->a = (uint8_t)a;
	u->b = (uint8_t)b;
	u->c = (uint8_t)c;
	u->d = flags ? GB_REG_RAX : GB_REG_NONE;
	gb_emit_store(m, daddr(j, SLOT(a)), a);
	u->o_b = (uint32_t)m->used;
	gb_emit_store(m, daddr(j, SLOT(b)), b);
	u->o_c = (uint32_t)m->used;
	gb_emit_store(m, daddr(j, SLOT(c)), c);
	u->o_d = (uint32_t)m->used;
	if (flags)
		gb_emit_store(m, daddr(j, SLOT(GB_REG_RAX)), GB_REG_RAX);
	gb_emit_load(m, a, daddr(j, HEAD));
	int32_t rec = -8 * (int32_t)in->words;
	unsigned at = in->vat, aw = 1; /* (the address words follow the id) */
	for (unsigned k = 0; k < p->nrefs; k++) {
		const struct gb_memref *r = &p->refs[k];
		bool rt = r->base != GB_REG_NONE || r->index != GB_REG_NONE;
		if (r->flags & GB_REF_WRITE) {
			if (rt)
				gb_emit_load_mem(m, b, a, rec + 8 * (int32_t)aw, 8, GB_EMIT_SEG_NONE);
			else
				gb_emit_mov_imm64(m, b, (uint64_t)r->disp);
			copy_value(m, a, rec + 8 * (int32_t)at, b, c, r->size, seg_of(r->flags));
		}
		aw += rt;
		at += wd(r->size);
	}
	int32_t flags_at = 0;
	for (int k = 0; k < nw; k++) {
		int32_t d = rec + 8 * (int32_t)at;
		unsigned n = gb_wreg_size(&w[k]);
		switch (w[k].kind) {
		case GB_WR_GPR: gb_emit_store_reg(m, a, d, w[k].num); break;
		case GB_WR_EFLAGS: flags_at = d; break;
		case GB_WR_MXCSR: gb_emit_stmxcsr(m, a, d); break;
		case GB_WR_K:
			gb_emit_kmov(m, c, w[k].num, __builtin_cpu_supports("avx512bw"));
			gb_emit_store_reg(m, a, d, c);
			break;
		default: gb_emit_store_vreg(m, a, d, w[k].num, n); break;
		}
		at += wd(n);
	}
	if (flags) {
		static const uint8_t lahf_seto[] = { 0x9f, 0x0f, 0x90, 0xc0 };
		gb_emit_raw(m, lahf_seto, sizeof(lahf_seto));
		gb_emit_store_reg(m, a, flags_at, GB_REG_RAX);
		gb_emit_load(m, GB_REG_RAX, daddr(j, SLOT(GB_REG_RAX)));
	}
	gb_emit_store_imm(m, a, rec + 8 * in->vdone, 1);
	gb_emit_load(m, c, daddr(j, SLOT(c)));
	gb_emit_load(m, b, daddr(j, SLOT(b)));
	gb_emit_load(m, a, daddr(j, SLOT(a)));
	jit_unit_end(j, u);
}
