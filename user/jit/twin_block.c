/* Counting twins (docs/trace.md "Counting after the budget"): the twin of
 * one block: what a twin can count exactly, the head's adds of the block's
 * counts (add form where the flags are dead, else flag-free), the copies
 * of a tight loop counting NS_CSETS iterations at a time (TW_FIX taking
 * back those counted ahead when it leaves), and the to-recording entry of
 * a block whose first instruction no twin counts.  Its ways out (links,
 * calls, lookups) are twin_link.c's; twin.c's pass makes and publishes
 * the twins. */
#include <errno.h>
#include <string.h>

#include "decode/plan.h"
#include "jit/internal.h"
#include "jit/twin.h"

/* --- what a twin can count --- */

bool ns_twin_countable(const struct gb_insn *gi, unsigned *rd, unsigned *wr)
{
	const struct gb_plan *p = &gi->plan;
	*rd = *wr = 0;
	if (!gb_jit__nostop_supported(gi) || (gi->flags & (GB_INSN_REP | GB_INSN_NEEDS_VEC)) ||
	    ns_is_popf(gi) || gi->zi.meta.category == ZYDIS_CATEGORY_INTERRUPT)
		return false;
	switch (gi->zi.mnemonic) {
	case ZYDIS_MNEMONIC_UD0: case ZYDIS_MNEMONIC_UD1: case ZYDIS_MNEMONIC_UD2:
	case ZYDIS_MNEMONIC_HLT:
		return false; /* (their recording path keeps their record at the fault) */
	default:
		break;
	}
	switch (p->kind) {
	case GB_PLAN_NONE:
		return true;
	case GB_PLAN_REFS:
	case GB_PLAN_BT:
	case GB_PLAN_STRING: /* (not REP: one pass) */
		for (unsigned k = 0; k < p->nrefs; k++) {
			if (p->refs[k].flags & GB_REF_INDEX_AL)
				return false;
			if (p->refs[k].flags & GB_REF_WRITE)
				++*wr;
			else
				++*rd;
		}
		return true;
	case GB_PLAN_ENTER: { /* insn.c's enter_refs: push rbp, L-1 frame pointers
			       * read and pushed, the new one pushed */
		unsigned l = p->level;
		if (l > ENTER_LEVELS)
			return false;
		*wr = 1 + (l > 1 ? l - 1 : 0) + (l ? 1 : 0);
		*rd = l > 1 ? l - 1 : 0;
		return true;
	}
	default:
		return false;
	}
}

/* Are the status flags dead at the head of the instructions v[0..n)?  Each
 * of CF PF AF ZF SF OF written (by an instruction that always writes it)
 * before any instruction reads it, within the block. */
static bool flags_dead(const struct gb_insn *v, size_t n)
{
	const uint32_t all = ZYDIS_CPUFLAG_CF | ZYDIS_CPUFLAG_PF | ZYDIS_CPUFLAG_AF |
			     ZYDIS_CPUFLAG_ZF | ZYDIS_CPUFLAG_SF | ZYDIS_CPUFLAG_OF;
	uint32_t written = 0;
	for (size_t i = 0; i < n; i++) {
		const ZydisAccessedFlags *f = v[i].zi.cpu_flags;
		if (!f || (f->tested & all & ~written))
			return false;
		switch (v[i].zi.mnemonic) {
		case ZYDIS_MNEMONIC_SHL: case ZYDIS_MNEMONIC_SHR: case ZYDIS_MNEMONIC_SAR:
		case ZYDIS_MNEMONIC_ROL: case ZYDIS_MNEMONIC_ROR: case ZYDIS_MNEMONIC_RCL:
		case ZYDIS_MNEMONIC_RCR: case ZYDIS_MNEMONIC_SHLD: case ZYDIS_MNEMONIC_SHRD:
			continue; /* a count of 0 leaves them: not a sure write */
		default:
			break;
		}
		written |= (f->modified | f->set_0 | f->set_1 | f->undefined) & all;
		if (written == all)
			return true;
		if (v[i].flags & GB_INSN_BRANCH || v[i].zi.mnemonic == ZYDIS_MNEMONIC_SYSCALL)
			return false;
	}
	return false;
}

/* --- emission --- */

/* add qword gs:[slot], imm8 (or imm32) */
static void tls_add(struct gb_emit *m, int32_t slot, uint32_t imm)
{
	uint8_t b[13] = { 0x65, 0x48, 0x83, 0x04, 0x25, (uint8_t)slot, (uint8_t)(slot >> 8), 0, 0 };
	if (imm < 128) {
		b[9] = (uint8_t)imm;
		gb_emit_raw(m, b, 10);
		return;
	}
	b[2] = 0x81;
	memcpy(b + 9, &imm, 4);
	gb_emit_raw(m, b, sizeof(b));
}

/* The head's adds: tb (the block's counts) to counter set set (sign -1:
 * taken off, always flag-free: a loop's exit, below); each add's end in
 * done[] (0: none).  Flag-free unless dead. */
static void head(struct gb_jit *j, struct unit *u, const uint16_t tb[3], bool dead, unsigned set,
		 int sign)
{
	const int32_t slot[3] = { T_CSET(set), T_CSET(set) + 8, T_CSET(set) + 16 };
	struct gb_emit *m = &j->em;
	uint32_t *done[3] = { &u->o_b, &u->o_load, &u->o_commit };
	u->a = dead;
	if (!dead) {
		gb_emit_tls_store(m, T_TWS, GB_REG_RAX);
		u->o_flg = (uint32_t)m->used;
	}
	for (unsigned c = 0; c < 3; c++) {
		if (!tb[c])
			continue;
		if (dead) {
			tls_add(m, slot[c], tb[c]);
		} else {
			gb_emit_tls_load(m, GB_REG_RAX, slot[c]);
			gb_emit_lea(m, GB_REG_RAX, GB_REG_RAX, GB_REG_NONE, 0, sign * (int64_t)tb[c]);
			gb_emit_tls_store(m, slot[c], GB_REG_RAX);
		}
		*done[c] = (uint32_t)m->used;
	}
	if (!dead) {
		gb_emit_tls_load(m, GB_REG_RAX, T_TWS);
		u->o_sahf1 = (uint32_t)m->used;
	}
}

/* A head with a block counter of its own (T_BLK + 8 * b): one add of 1,
 * its weights (the counts a head of the set form would add) kept for the
 * harvest.  Its end is each count's done[] (one add does all three). */
static void head_own(struct gb_jit *j, struct unit *u, const uint16_t tb[3], bool dead, unsigned b)
{
	struct gb_emit *m = &j->em;
	const int32_t slot = T_BLK + 8 * (int32_t)b;
	memcpy(j->bw[b], tb, sizeof(j->bw[b]));
	u->a = dead;
	if (dead) {
		tls_add(m, slot, 1);
	} else {
		gb_emit_tls_store(m, T_TWS, GB_REG_RAX);
		u->o_flg = (uint32_t)m->used;
		gb_emit_tls_load(m, GB_REG_RAX, slot);
		gb_emit_lea(m, GB_REG_RAX, GB_REG_RAX, GB_REG_NONE, 0, 1);
		gb_emit_tls_store(m, slot, GB_REG_RAX);
	}
	u->o_b = u->o_load = u->o_commit = (uint32_t)m->used;
	if (!dead) {
		gb_emit_tls_load(m, GB_REG_RAX, T_TWS);
		u->o_sahf1 = (uint32_t)m->used;
	}
}

static bool direct(const struct gb_insn *gi)
{
	return gi->ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && gi->ops[0].imm.is_relative;
}

/* The twin of a block whose first instruction no twin counts: take the
 * lock and enter its recording block (an entry unit without the owner
 * check: unwind.c's entry).  gebpf gone, the acquire's way on (T_BAIL) is
 * the instruction run natively, then the twin of what follows. */
static uint64_t to_recording(struct gb_jit *j, uint64_t pc, const struct gb_insn *gi)
{
	uint64_t blk = jit_block_of(j, pc);
	if (!blk || !gi)
		return 0;
	struct gb_emit *m = &j->em;
	uint64_t at = gb_emit_here(m);
	struct unit *u = jit_unit_add(j, U_NS, pc);
	if (!u)
		return 0;
	u->ns = GB_JIT_NS_ENTRY;
	size_t from = m->used, bail_at = 0;
	const uint64_t magic = 0x1122334455667788ull;
	ns_acquire(j, magic); /* (its way on once gebpf is gone: below) */
	gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, blk);
	jit_unit_end(j, u);
	uint64_t bail = gb_emit_here(m);
	for (size_t k = from; !m->err && !bail_at && k + 8 <= m->used; k++)
		if (!memcmp(m->buf + k, &magic, 8))
			bail_at = k;
	if (m->err || !bail_at) {
		m->err = m->err ? m->err : -EINVAL;
		return 0;
	}
	memcpy(m->buf + bail_at, &bail, 8);
	struct unit *n = jit_unit_add(j, U_TWIN, pc);
	if (!n)
		return 0;
	n->tw = TW_INSN; /* (uncounted: nobody counts once gebpf is gone) */
	gb_emit_moved(m, gi);
	jit_unit_end(j, n);
	struct unit *l = jit_unit_add(j, U_TWIN, gi->pc + gi->len);
	if (!l)
		return 0;
	l->tw = TW_LINK;
	ns_twin_jump_to(j, gi->pc + gi->len);
	jit_unit_end(j, l);
	return at;
}

/* The twin of the block at pc (*f its kind), or 0. */
uint64_t ns_twin_block(struct gb_jit *j, uint64_t pc, gb_jit_fetch_fn fetch, void *ctx,
		       jit_block_fn translate, uint8_t *f)
{
	struct gb_insn in[GB_JIT_BLOCK_INSNS];
	uint16_t c[GB_JIT_BLOCK_INSNS][3];
	size_t n = 0;
	uint64_t at = pc;
	bool ends = false;
	while (n < GB_JIT_BLOCK_INSNS && inside(j, at)) {
		const struct gb_insn *gi = fetch(ctx, at);
		unsigned rd, wr;
		if (gi && ns_twin_rep_countable(gi, &rd, &wr)) { /* (its counts: twin_rep.c's) */
			in[n] = *gi;
			c[n][0] = c[n][1] = c[n][2] = 0;
			n++;
			ends = true;
			break;
		}
		if (!gi || !ns_twin_countable(gi, &rd, &wr)) {
			if (!n && gi) { /* its recording block, taking the lock */
				in[0] = *gi;
				if (!jit_block_of(j, pc) && translate)
					translate(j, pc, fetch, ctx);
				*f = TW_F_TOREC;
				return to_recording(j, pc, &in[0]);
			}
			break;
		}
		in[n] = *gi;
		c[n][0] = 1;
		c[n][1] = (uint16_t)rd;
		c[n][2] = (uint16_t)wr;
		n++;
		at = gi->pc + gi->len;
		if ((gi->flags & GB_INSN_BRANCH) || gi->zi.mnemonic == ZYDIS_MNEMONIC_SYSCALL) {
			ends = true;
			break;
		}
	}
	if (!n)
		return 0;
	*f = TW_F_TWIN;
	/* rest[i]: the counts of in[i..n) (what a thread stopped at in[i] has
	 * not run) */
	uint16_t rest[GB_JIT_BLOCK_INSNS + 1][3] = { { 0 } };
	for (size_t i = n; i-- > 0;)
		for (unsigned k = 0; k < 3; k++)
			rest[i][k] = (uint16_t)(rest[i + 1][k] + c[i][k]);
	/* A block whose last instruction branches back to its own start (a
	 * tight loop) gets NS_CSETS copies branching to the next, the first
	 * counting NS_CSETS iterations at its head and the others nothing:
	 * one add per counter per NS_CSETS iterations (a chain through memory,
	 * store, load, add, and four micro-ops each: bench_budget.py's hash
	 * spent 33.6-36.0 CPU ns a call against 18.5-19.6 natively with an add
	 * per iteration; docs/benchmarks.md).  Leaving the loop from copy c
	 * takes back the iterations counted ahead (flag-free: TW_FIX). */
	const struct gb_insn *last = &in[n - 1];
	bool self = ends && (last->flags & GB_INSN_BRANCH) && !gb_jit__emulated(last) &&
		    last->zi.mnemonic != ZYDIS_MNEMONIC_SYSCALL &&
		    last->pc + last->len + (uint64_t)last->zi.raw.imm[0].value.s == pc;
	unsigned copies = self ? NS_CSETS : 1;
	bool dead = flags_dead(in, n);
	/* The flags live at the block's start (a jcc's other side, an adc, a
	 * setcc: a third of deflate_fast's blocks in node), the adds go before
	 * the first instruction where they are dead, in the add form (three
	 * instructions where the flag-free form takes eleven); the units
	 * before it take back a negative count (what ran, not yet added).
	 * Not in a tight loop's copies (their heads count ahead). */
	size_t hat = 0;
	if (!dead && copies == 1)
		for (size_t i = 1; i < n && !hat; i++)
			if (flags_dead(in + i, n - i))
				hat = i;
	struct gb_emit *m = &j->em;
	uint64_t twin = gb_emit_here(m), copy0 = twin;
	size_t back = 0; /* the previous copy's branch to this one (rel32) */
	unsigned set = j->tset++ % NS_CSETS;
	uint16_t all[3], ahead[3];
	for (unsigned k = 0; k < 3; k++)
		all[k] = (uint16_t)(rest[0][k] * copies);
	for (unsigned cp = 0; cp < copies && !m->err; cp++) {
		uint64_t here = gb_emit_here(m);
		unsigned left = copies - 1 - cp; /* iterations counted ahead */
		for (unsigned k = 0; k < 3; k++)
			ahead[k] = (uint16_t)(rest[0][k] * left);
		if (cp)
			gb_emit_repoint(m, back, here);
		for (size_t i = 0; i < n && !m->err; i++) {
			const struct gb_insn *gi = &in[i];
			uint64_t next = gi->pc + gi->len;
			if (!cp && i == hat) {
				struct unit *h = jit_unit_add(j, U_TWIN, gi->pc);
				if (!h)
					return 0;
				h->tw = TW_HEAD;
				for (unsigned k = 0; k < 3; k++) {
					h->tb[k] = (int16_t)(hat ? rest[hat][k] : all[k]);
					h->tpre[k] = (int16_t)(hat ? rest[hat][k] - all[k] : 0);
				}
				if (j->nbs < NS_BSLOTS && !j->o.twin_sets) {
					head_own(j, h, all, dead || hat, j->nbs++);
					j->stats.twin_heads_own++;
				} else {
					head(j, h, all, dead || hat, set, 1);
				}
				j->stats.twin_heads++;
				j->stats.twin_heads_live += !dead;
				j->stats.twin_heads_moved += hat != 0;
				jit_unit_end(j, h);
			}
			if (gi->flags & GB_INSN_REP) { /* (the block's last: twin_rep.c) */
				unsigned rd, wr;
				ns_twin_rep_countable(gi, &rd, &wr);
				if (ns_twin_rep(j, gi, set, rd, wr))
					return 0;
				break;
			}
			struct unit *u = jit_unit_add(j, U_TWIN, gi->pc);
			if (!u)
				return 0;
			u->tw = TW_INSN;
			for (unsigned k = 0; k < 3; k++)
				u->tb[k] = (int16_t)(i < hat ? rest[i][k] - all[k] : rest[i][k] + ahead[k]);
			if (gi->zi.mnemonic == ZYDIS_MNEMONIC_SYSCALL) {
				u->tw = TW_SYSCALL;
				u->tgt = next;
				gb_emit_raw(m, gi->bytes, gi->len);
				u->o_insn = (uint32_t)m->used;
				gb_emit_mov_imm64(m, GB_REG_RCX, next); /* (the kernel's rcx, natively) */
				ns_twin_jump_to(j, next);
				jit_unit_end(j, u);
				break;
			}
			if (gb_jit__emulated(gi)) {
				if (gi->zi.mnemonic == ZYDIS_MNEMONIC_CALL && direct(gi)) {
					u->tw = TW_CALL;
					u->tgt = next + (uint64_t)gi->zi.raw.imm[0].value.s;
					ns_twin_push_ret(j, u, next);
					ns_twin_jump_to(j, u->tgt);
				} else {
					u->tw = TW_LOOKUP;
					ns_twin_lookup(j, gi, u);
				}
				jit_unit_end(j, u);
				break;
			}
			if (gi->flags & GB_INSN_BRANCH) { /* jmp / jcc rel */
				uint64_t tgt = next + (uint64_t)gi->zi.raw.imm[0].value.s;
				size_t src = gb_emit_jump(m, gi->zi.mnemonic, gb_emit_here(m));
				if (m->err)
					return 0;
				if (!self)
					ns_twin_link_to(j, src, tgt);
				else if (cp + 1 < copies)
					back = src; /* (to the next copy, made next) */
				else
					gb_emit_repoint(m, src, copy0);
				jit_unit_end(j, u);
				if (gi->zi.mnemonic != ZYDIS_MNEMONIC_JMP && left) {
					struct unit *x = jit_unit_add(j, U_TWIN, next);
					if (!x)
						return 0;
					x->tw = TW_FIX;
					for (unsigned k = 0; k < 3; k++)
						x->tb[k] = (int16_t)ahead[k];
					head(j, x, ahead, false, set, -1);
					jit_unit_end(j, x);
				}
				if (gi->zi.mnemonic != ZYDIS_MNEMONIC_JMP) {
					struct unit *l = jit_unit_add(j, U_TWIN, next);
					if (!l)
						return 0;
					l->tw = TW_LINK;
					ns_twin_jump_to(j, next);
					jit_unit_end(j, l);
				}
				break;
			}
			gb_emit_moved(m, gi);
			jit_unit_end(j, u);
		}
		if (!ends) {
			struct unit *l = jit_unit_add(j, U_TWIN, at);
			if (!l)
				return 0;
			l->tw = TW_LINK;
			ns_twin_jump_to(j, at);
			jit_unit_end(j, l);
		}
	}
	return m->err ? 0 : twin;
}
