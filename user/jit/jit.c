/* The translator: see jit.h.  Layout of one translated instruction (A, B:
 * two registers its addresses do not use; the slots are in the data part):
 *
 *   mov [slot A], A ; mov [slot B], B     save
 *   mov A, [head]
 *   mov qword [A], id                     record: the instruction's id
 *   lea B, [address k] ; mov [A+8+8k], B  ... and each run-time address
 *   lea A, [A + 8*words] ; mov [head], A  commit
 *   mov B, [slot B] ; mov A, [slot A]     restore
 *   <the instruction>                     (a jcc/jmp: to a block or a stub)
 *
 * A block starts with a budget check (flag-free: lea and jrcxz) that leaves
 * through an exit stub to the block's own address when the ring may not
 * hold one more block, so gebpf drains it.
 */
#include "jit/jit.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "common/bound.h"
#include "common/grow.h"
#include "decode/plan.h"
#include "jit/emit.h"

enum ukind { U_HEAD, U_INSN, U_STUB, U_LINK };

/* A piece of the code region, in address order. */
struct unit {
	uint64_t off;          /* [off, end) in the code region */
	uint32_t end;
	uint8_t kind;
	uint8_t a, b;          /* U_INSN: the scratch registers (b: GB_REG_NONE if unused) */
	uint8_t words;         /* U_INSN: ring words it writes; U_STUB (emu): the
				* words of the instruction it stands for */
	bool emu;              /* U_STUB: gebpf performs the instruction at pc (a
				* call, ret or indirect jump) at the stop */
	uint32_t o_b, o_load;  /* U_INSN: after A's save, after B's save */
	uint32_t o_commit;     /* U_INSN: after the head's update */
	uint32_t o_insn;       /* U_INSN: the instruction's copy; U_STUB: after the syscall */
	uint32_t id;           /* U_INSN: instruction id */
	uint64_t pc;           /* U_HEAD: block; U_INSN: instruction; U_STUB/U_LINK: target */
};

struct ref {
	int64_t disp;
	uint32_t size;
	uint8_t flags;
	bool rt;               /* address recorded at run time */
};

struct insn {
	uint64_t pc;
	uint8_t len, nrefs;
	uint8_t bytes[GB_INSN_MAX_LEN];
	struct ref refs[6];
};

struct stub {
	uint64_t target;
	uint32_t src;          /* rel32 field that jumps here, to re-point; UINT32_MAX: none */
};

struct gb_jit {
	struct gb_jit_mem m;
	struct gb_emit em;
	uint64_t start, end;
	struct unit *u; size_t nu, ucap;
	struct insn *in; size_t nin, incap;
	struct stub *st; size_t nst, stcap;   /* stubs not yet linked to a block */
	uint64_t *hk, *hv; size_t hcap, hn;   /* block pc -> target address */
	uint64_t lo, hi;                      /* span of the translated bytes */
	struct gb_jit_stats stats;
};

/* Data part. */
#define SLOT(r)   ((uint64_t)(r) * 8)
#define HEAD      (GB_REG_COUNT * 8)
#define BUDGET    (HEAD + 8)
#define RING      GB_JIT_DATA_SLOTS
#define BLOCK_WORDS (GB_JIT_BLOCK_INSNS * 7)

static uint64_t *dword(const struct gb_jit *j, size_t off) { return (uint64_t *)(j->m.data + off); }
static uint64_t daddr(const struct gb_jit *j, size_t off) { return j->m.data_addr + off; }

struct gb_jit *gb_jit__new(const struct gb_jit_mem *m, uint64_t start, uint64_t end)
{
	struct gb_jit *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->m = *m;
	j->start = start;
	j->end = end;
	j->em = (struct gb_emit){ .buf = m->code, .base = m->code_addr, .size = GB_JIT_CODE_SIZE };
	j->lo = UINT64_MAX;
	gb_jit__ring_reset(j);
	return j;
}

void gb_jit__free(struct gb_jit *j)
{
	if (!j)
		return;
	free(j->u);
	free(j->in);
	free(j->st);
	free(j->hk);
	free(j->hv);
	free(j);
}

void gb_jit__flush(struct gb_jit *j)
{
	j->nu = j->nin = j->nst = j->hn = 0;
	j->lo = UINT64_MAX;
	j->hi = 0;
	if (j->hk)
		memset(j->hk, 0, j->hcap * sizeof(*j->hk));
	j->em.used = 0;
	j->em.err = 0;
	j->stats.flushes++;
}

/* --- block map (open addressing; key 0 is empty: pc 0 is never code) --- */

static size_t hslot(const struct gb_jit *j, uint64_t pc)
{
	size_t h = (size_t)((pc * 0x9e3779b97f4a7c15ull) >> 20) & (j->hcap - 1);
	while (j->hk[h] && j->hk[h] != pc)
		h = (h + 1) & (j->hcap - 1);
	return h;
}

static uint64_t block_of(const struct gb_jit *j, uint64_t pc)
{
	if (!j->hcap)
		return 0;
	size_t h = hslot(j, pc);
	return j->hk[h] == pc ? j->hv[h] : 0;
}

static int block_put(struct gb_jit *j, uint64_t pc, uint64_t addr)
{
	if ((j->hn + 1) * 2 > j->hcap) {
		size_t oc = j->hcap, nc = oc ? oc * 2 : 1024;
		uint64_t *ok = j->hk, *ov = j->hv;
		j->hk = calloc(nc, sizeof(*j->hk));
		j->hv = calloc(nc, sizeof(*j->hv));
		if (!j->hk || !j->hv) {
			free(j->hk);
			free(j->hv);
			j->hk = ok;
			j->hv = ov;
			return -ENOMEM;
		}
		j->hcap = nc;
		for (size_t k = 0; k < oc; k++)
			if (ok[k]) {
				size_t h = hslot(j, ok[k]);
				j->hk[h] = ok[k];
				j->hv[h] = ov[k];
			}
		free(ok);
		free(ov);
	}
	size_t h = hslot(j, pc);
	if (!j->hk[h])
		j->hn++;
	j->hk[h] = pc;
	j->hv[h] = addr;
	return 0;
}

/* --- what can be translated --- */

static bool rel_branch(const struct gb_insn *in)
{
	return in->zi.mnemonic == ZYDIS_MNEMONIC_JMP || (in->zi.meta.category == ZYDIS_CATEGORY_COND_BR &&
	       in->zi.mnemonic != ZYDIS_MNEMONIC_JRCXZ && in->zi.mnemonic != ZYDIS_MNEMONIC_JECXZ &&
	       in->zi.mnemonic != ZYDIS_MNEMONIC_LOOP && in->zi.mnemonic != ZYDIS_MNEMONIC_LOOPE &&
	       in->zi.mnemonic != ZYDIS_MNEMONIC_LOOPNE);
}

static bool relative_imm(const struct gb_insn *in)
{
	for (unsigned k = 0; k < in->zi.operand_count; k++)
		if (in->ops[k].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && in->ops[k].imm.is_relative)
			return true;
	return false;
}

bool gb_jit__emulated(const struct gb_insn *in)
{
	const ZydisDecodedInstruction *z = &in->zi;
	if (z->meta.branch_type == ZYDIS_BRANCH_TYPE_FAR || z->operand_width != 64 ||
	    (in->flags & GB_INSN_NEEDS_VEC))
		return false;
	switch (z->mnemonic) {
	case ZYDIS_MNEMONIC_RET:
	case ZYDIS_MNEMONIC_CALL:
		return true;
	case ZYDIS_MNEMONIC_JMP: /* indirect only; jmp rel is rebuilt */
		return !relative_imm(in);
	default:
		return false;
	}
}

bool gb_jit__supported(const struct gb_insn *in)
{
	const struct gb_plan *p = &in->plan;
	if (in->flags & (GB_INSN_SYSCALL | GB_INSN_NEEDS_VEC | GB_INSN_REP))
		return false;
	if (p->kind != GB_PLAN_NONE && p->kind != GB_PLAN_REFS &&
	    !(p->kind == GB_PLAN_STRING && !p->reg_bits))
		return false;
	for (unsigned k = 0; k < p->nrefs; k++)
		if (p->refs[k].flags & GB_REF_INDEX_AL)
			return false;
	for (unsigned k = 0; k < in->zi.operand_count; k++)
		if (in->ops[k].type == ZYDIS_OPERAND_TYPE_MEMORY && in->ops[k].mem.base == ZYDIS_REGISTER_EIP)
			return false; /* EIP-relative (0x67): wraps at 4 GiB, stepped */
	switch (in->zi.meta.category) {
	case ZYDIS_CATEGORY_CALL: case ZYDIS_CATEGORY_RET:
		return gb_jit__emulated(in);
	case ZYDIS_CATEGORY_UNCOND_BR:
		if (gb_jit__emulated(in))
			return true;
		/* fall through */
	case ZYDIS_CATEGORY_COND_BR:
		/* direct jmp / jcc rel are rebuilt; the rest is stepped */
		if (!(rel_branch(in) && relative_imm(in)))
			return false;
		break;
	case ZYDIS_CATEGORY_INTERRUPT: case ZYDIS_CATEGORY_SYSTEM: case ZYDIS_CATEGORY_SYSCALL:
	case ZYDIS_CATEGORY_SYSRET:
		return false;
	default:
		if (relative_imm(in)) /* xbegin and the like */
			return false;
		break;
	}
	switch (in->zi.mnemonic) {
	case ZYDIS_MNEMONIC_UD0: case ZYDIS_MNEMONIC_UD1: case ZYDIS_MNEMONIC_UD2:
	case ZYDIS_MNEMONIC_INT3: case ZYDIS_MNEMONIC_INT: case ZYDIS_MNEMONIC_INT1:
	case ZYDIS_MNEMONIC_INTO: case ZYDIS_MNEMONIC_HLT: case ZYDIS_MNEMONIC_WRFSBASE:
	case ZYDIS_MNEMONIC_WRGSBASE: case ZYDIS_MNEMONIC_POPFQ: case ZYDIS_MNEMONIC_POPF:
	case ZYDIS_MNEMONIC_XBEGIN: case ZYDIS_MNEMONIC_XEND: case ZYDIS_MNEMONIC_XABORT:
		return false; /* signals, segment bases, TF: the step engine's */
	default:
		return true;
	}
}

/* --- emission --- */

static struct unit *unit_add(struct gb_jit *j, enum ukind k, uint64_t pc)
{
	if (GB_GROW(&j->u, &j->ucap, j->nu + 1))
		return NULL;
	struct unit *u = &j->u[j->nu++];
	memset(u, 0, sizeof(*u));
	u->kind = (uint8_t)k;
	u->pc = pc;
	u->off = (uint32_t)j->em.used;
	return u;
}

static void unit_end(struct gb_jit *j, struct unit *u) { u->end = (uint32_t)j->em.used; }

/* An exit stub to target; src: the rel32 field jumping here (re-pointed at
 * a block for target once it is translated), or UINT32_MAX. */
static uint64_t stub(struct gb_jit *j, uint64_t target, uint32_t src, uint8_t emu_words)
{
	uint64_t at = gb_emit_here(&j->em);
	struct unit *u = unit_add(j, U_STUB, target);
	if (!u)
		return 0;
	u->emu = emu_words != 0;
	u->words = emu_words;
	gb_emit_store(&j->em, daddr(j, SLOT(GB_REG_RAX)), GB_REG_RAX);
	gb_emit_store(&j->em, daddr(j, SLOT(GB_REG_RCX)), GB_REG_RCX);
	gb_emit_store(&j->em, daddr(j, SLOT(GB_REG_R11)), GB_REG_R11);
	gb_emit_mov_imm32(&j->em, GB_REG_RAX, 39 /* getpid */);
	gb_emit_syscall(&j->em);
	u->o_insn = (uint32_t)j->em.used;
	gb_emit_load(&j->em, GB_REG_RAX, daddr(j, SLOT(GB_REG_RAX)));
	gb_emit_load(&j->em, GB_REG_RCX, daddr(j, SLOT(GB_REG_RCX)));
	gb_emit_load(&j->em, GB_REG_R11, daddr(j, SLOT(GB_REG_R11)));
	gb_emit_jump(&j->em, ZYDIS_MNEMONIC_JMP, target);
	unit_end(j, u);
	j->stats.stubs++;
	if (src != UINT32_MAX && target >= j->start && target <= j->end) {
		if (GB_GROW(&j->st, &j->stcap, j->nst + 1))
			return 0;
		j->st[j->nst++] = (struct stub){ target, src };
	}
	return at;
}

/* A jump (mn) to the block at target, or to a stub for it. */
struct link { ZydisMnemonic mn; uint64_t target; uint32_t src; };

static bool inside(const struct gb_jit *j, uint64_t pc) { return pc >= j->start && pc <= j->end; }

static uint32_t pick_scratch(const struct gb_plan *p, unsigned not)
{
	static const uint8_t order[] = { GB_REG_RAX, GB_REG_RCX, GB_REG_RDX, GB_REG_RBX, GB_REG_RSI,
					 GB_REG_RDI, GB_REG_R8, GB_REG_R9, GB_REG_R10, GB_REG_R11 };
	for (size_t k = 0; k < sizeof(order); k++) {
		unsigned r = order[k];
		bool used = r == not;
		for (unsigned i = 0; i < p->nrefs; i++)
			used |= p->refs[i].base == r || p->refs[i].index == r;
		if (!used)
			return r;
	}
	return GB_REG_NONE;
}

/* The instrumentation and copy of one instruction.  Returns its id, or -1. */
static int one(struct gb_jit *j, const struct gb_insn *gi)
{
	const struct gb_plan *p = &gi->plan;
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
	if (p->kind != GB_PLAN_NONE) {
		in->nrefs = p->nrefs;
		for (unsigned k = 0; k < p->nrefs; k++) {
			const struct gb_memref *r = &p->refs[k];
			in->refs[k] = (struct ref){ r->disp, r->size, r->flags,
						    r->base != GB_REG_NONE || r->index != GB_REG_NONE };
			nrt += in->refs[k].rt;
		}
	}
	unsigned a = pick_scratch(p, GB_REG_NONE), b = nrt ? pick_scratch(p, a) : GB_REG_NONE;
	if (a == GB_REG_NONE || (nrt && b == GB_REG_NONE))
		return -1;
	uint32_t id = (uint32_t)j->nin;
	struct unit *u = unit_add(j, U_INSN, gi->pc);
	if (!u)
		return -1;
	u->id = id;
	u->a = (uint8_t)a;
	u->b = (uint8_t)b;
	u->words = (uint8_t)(1 + nrt);
	gb_emit_store(&j->em, daddr(j, SLOT(a)), a);
	u->o_b = (uint32_t)j->em.used;
	if (nrt)
		gb_emit_store(&j->em, daddr(j, SLOT(b)), b);
	u->o_load = (uint32_t)j->em.used;
	gb_emit_load(&j->em, a, daddr(j, HEAD));
	gb_emit_store_imm(&j->em, a, 0, (int32_t)id);
	unsigned w = 1;
	for (unsigned k = 0; k < in->nrefs; k++) {
		const struct gb_memref *r = &p->refs[k];
		if (!in->refs[k].rt)
			continue;
		gb_emit_lea(&j->em, b, r->base, r->index, r->scale, r->disp);
		gb_emit_store_reg(&j->em, a, (int32_t)(8 * w++), b);
	}
	gb_emit_lea(&j->em, a, a, GB_REG_NONE, 0, 8 * (int64_t)w);
	gb_emit_store(&j->em, daddr(j, HEAD), a);
	u->o_commit = (uint32_t)j->em.used;
	if (nrt)
		gb_emit_load(&j->em, b, daddr(j, SLOT(b)));
	gb_emit_load(&j->em, a, daddr(j, SLOT(a)));
	u->o_insn = (uint32_t)j->em.used;
	j->nin++;
	j->stats.insns++;
	return (int)id;
}

uint64_t gb_jit__block(struct gb_jit *j, uint64_t pc, gb_jit_fetch_fn fetch, void *ctx)
{
	uint64_t have = block_of(j, pc);
	if (have)
		return have;
	const struct gb_insn *first = inside(j, pc) ? fetch(ctx, pc) : NULL;
	if (!first || !gb_jit__supported(first))
		return 0;
	size_t mark_u = j->nu, mark_in = j->nin, mark_used = j->em.used;
	uint64_t head = gb_emit_here(&j->em);

	/* Budget check: leave (to this block's own address) when the ring may
	 * not hold one more block. */
	struct unit *h = unit_add(j, U_HEAD, pc);
	if (!h)
		return 0;
	gb_emit_store(&j->em, daddr(j, SLOT(GB_REG_RCX)), GB_REG_RCX);
	gb_emit_load(&j->em, GB_REG_RCX, daddr(j, BUDGET));
	gb_emit_lea(&j->em, GB_REG_RCX, GB_REG_RCX, GB_REG_NONE, 0, -1);
	gb_emit_store(&j->em, daddr(j, BUDGET), GB_REG_RCX);
	uint64_t jr = gb_emit_here(&j->em);
	/* jrcxz (2) ; mov rcx,[slot] (7) ; jmp short (2) ; full: mov rcx,[slot] (7) ; jmp (5) */
	uint64_t full = jr + 2 + 7 + 2, body = full + 7 + 5;
	gb_emit_jrcxz(&j->em, full);
	gb_emit_load(&j->em, GB_REG_RCX, daddr(j, SLOT(GB_REG_RCX)));
	gb_emit_jmp8(&j->em, body);
	gb_emit_load(&j->em, GB_REG_RCX, daddr(j, SLOT(GB_REG_RCX)));
	size_t full_src = gb_emit_jump(&j->em, ZYDIS_MNEMONIC_JMP, gb_emit_here(&j->em));
	unit_end(j, h);
	if (!j->em.err && gb_emit_here(&j->em) != body)
		j->em.err = -EINVAL;

	struct link links[2];
	unsigned nlinks = 0;
	uint64_t at = pc;
	for (unsigned n = 0; n < GB_JIT_BLOCK_INSNS && !j->em.err; n++) {
		const struct gb_insn *gi = n ? (inside(j, at) ? fetch(ctx, at) : NULL) : first;
		if (!gi || !gb_jit__supported(gi))
			break;
		int id = one(j, gi);
		if (id < 0) {
			j->em.err = j->em.err ? j->em.err : -EINVAL;
			break;
		}
		struct unit *u = &j->u[j->nu - 1];
		uint64_t next = gi->pc + gi->len;
		if (gb_jit__emulated(gi)) {
			/* gebpf performs it at the stub's stop; without gebpf
			 * the stub goes on to the original instruction */
			uint8_t words = u->words;
			unit_end(j, u);
			stub(j, gi->pc, UINT32_MAX, words);
			at = 0;
			break;
		}
		if (gi->flags & GB_INSN_BRANCH) {
			uint64_t tgt = next + (uint64_t)gi->zi.raw.imm[0].value.s;
			uint32_t src = (uint32_t)gb_emit_jump(&j->em, gi->zi.mnemonic, gb_emit_here(&j->em));
			unit_end(j, u);
			links[nlinks++] = (struct link){ gi->zi.mnemonic, tgt, src };
			at = gi->zi.mnemonic == ZYDIS_MNEMONIC_JMP ? 0 : next;
			break;
		}
		gb_emit_moved(&j->em, gi);
		unit_end(j, u);
		at = next;
	}
	/* Fall through (past a jcc, or the block's end) to the next address. */
	if (at) {
		struct unit *l = unit_add(j, U_LINK, at);
		if (l) {
			uint32_t src = (uint32_t)gb_emit_jump(&j->em, ZYDIS_MNEMONIC_JMP, gb_emit_here(&j->em));
			unit_end(j, l);
			links[nlinks++] = (struct link){ ZYDIS_MNEMONIC_JMP, at, src };
		}
	}
	/* Point the links at blocks, or at stubs (after the block's code). */
	for (unsigned k = 0; k < nlinks && !j->em.err; k++) {
		uint64_t dst = block_of(j, links[k].target);
		if (!dst)
			dst = stub(j, links[k].target, links[k].src, 0);
		gb_emit_repoint(&j->em, links[k].src, dst);
	}
	uint64_t full_stub = stub(j, pc, UINT32_MAX, 0);
	if (!j->em.err)
		gb_emit_repoint(&j->em, full_src, full_stub);
	if (j->em.err || block_put(j, pc, head)) {
		/* Out of room (or unencodable): nothing of it stays. */
		j->nu = mark_u;
		j->nin = mark_in;
		j->em.used = mark_used;
		j->em.err = 0;
		return 0;
	}
	j->stats.blocks++;
	/* Exits waiting for this block jump straight to it now. */
	for (size_t k = 0; k < j->nst;) {
		if (j->st[k].target == pc) {
			gb_emit_repoint(&j->em, j->st[k].src, head);
			j->stats.links++;
			j->st[k] = j->st[--j->nst];
		} else {
			k++;
		}
	}
	return head;
}

size_t gb_jit__ninsns(const struct gb_jit *j) { return j->nin; }

void gb_jit__insn_bytes(const struct gb_jit *j, size_t id, uint64_t *pc, const uint8_t **bytes,
			uint8_t *len)
{
	*pc = j->in[id].pc;
	*bytes = j->in[id].bytes;
	*len = j->in[id].len;
}

void gb_jit__span(const struct gb_jit *j, uint64_t *lo, uint64_t *hi)
{
	*lo = j->lo;
	*hi = j->hi;
}

/* --- the ring --- */

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

/* --- where a thread is --- */

bool gb_jit__in_code(const struct gb_jit *j, uint64_t rip)
{
	return rip >= j->m.code_addr && rip < j->m.code_addr + j->em.used;
}

uint64_t gb_jit__saved(const struct gb_jit *j, unsigned r) { return *dword(j, SLOT(r)); }

int gb_jit__locate(const struct gb_jit *j, uint64_t rip, struct gb_jit_loc *out)
{
	memset(out, 0, sizeof(*out));
	if (!gb_jit__in_code(j, rip))
		return -ENOENT;
	uint64_t off = rip - j->m.code_addr;
	size_t lo = GB_UPPER(j->u, j->nu, off, off); /* the unit is the last with u.off <= off */
	if (!lo || off >= j->u[lo - 1].end)
		return -ENOENT;
	const struct unit *u = &j->u[lo - 1];
	out->pc = u->pc;
	switch (u->kind) {
	case U_HEAD:
		if (off > u->off)
			out->restore = 1u << GB_REG_RCX;
		return 0;
	case U_LINK:
		return 0;
	case U_STUB: {
		static const uint8_t saved[] = { GB_REG_RAX, GB_REG_RCX, GB_REG_R11 };
		for (unsigned k = 0; k < 3; k++)
			if (off > u->off + 7 * k) /* each save is 7 bytes */
				out->restore |= 1u << saved[k];
		out->stub = true;
		out->stub_call = off == u->o_insn;
		out->emulate = u->emu;
		/* the instruction it stands for has its record: not run yet */
		out->unwrite = u->emu ? u->words : 0;
		return 0;
	}
	case U_INSN:
		if (off > u->off)
			out->restore |= 1u << u->a;
		if (off > u->o_b && u->b != GB_REG_NONE)
			out->restore |= 1u << u->b;
		if (off >= u->o_commit)
			out->unwrite = u->words;
		out->at_insn = off == u->o_insn; /* (rip is never inside the copy) */
		return 0;
	}
	return -ENOENT;
}

void gb_jit__stats(const struct gb_jit *j, struct gb_jit_stats *s) { *s = j->stats; }
