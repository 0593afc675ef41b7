/* The translator: see jit.h.  A block starts with a budget check
 * (flag-free: lea and jrcxz) that leaves through an exit stub to the
 * block's own address when the ring may not hold one more block, so gebpf
 * drains it; then its instructions, each with its record before its copy
 * (insn.c), and its jumps out, to translated blocks or to exit stubs.  The
 * stop-free mode's pieces are the lower files' (lock.c, ibl.c, ring.c,
 * popf.c, rep.c, twin.c): this file puts them together.
 */
#include "jit/jit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jit/emit.h"
#include "jit/internal.h"

struct gb_jit *gb_jit__new(const struct gb_jit_mem *m, uint64_t start, uint64_t end)
{
	static const struct gb_jit_opts o = { 0 };
	return gb_jit__new_opts(m, start, end, &o);
}

/* Stop-free mode: the table at the top of the code, the routines at its
 * start. */
static void ns_setup(struct gb_jit *j)
{
	if (!j->o.nostop)
		return;
	ns_table_clear(j);
	ns_count_fold(j);
	ns_twin_reset(j);
	j->ncs = 0;
	ns_routines(j);
	j->nen = j->nwant = 0;
}

struct gb_jit *gb_jit__new_opts(const struct gb_jit_mem *m, uint64_t start, uint64_t end,
				const struct gb_jit_opts *o)
{
	if (o->values && o->nostop)
		return NULL; /* (vals.c: the mode with stops only) */
	struct gb_jit *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->m = *m;
	j->start = start;
	j->end = end;
	j->o = *o;
	j->em = (struct gb_emit){ .buf = m->code, .base = m->code_addr, .size = GB_JIT_CODE_SIZE };
	j->lo = UINT64_MAX;
	j->ring_bytes = GB_JIT_RING_SIZE;
	if (o->nostop) {
		uint64_t top = m->code_addr + GB_JIT_CODE_SIZE - NS_TBL_BYTES;
		j->tbl = top & ~(uint64_t)(NS_TBL_BYTES / 2 - 1);
		j->em.size = j->tbl - m->code_addr;
		j->ring_bytes = NS_TWCOL - RING;
		if (!j->o.ring_timeout_ms)
			j->o.ring_timeout_ms = 1000;
	}
	gb_jit__ring_reset(j);
	if (o->nostop) {
		ns_areas_init(j);
		ns_popf_table(j);
		ns_live_init(j);
	}
	ns_setup(j);
	if (j->em.err) {
		gb_jit__free(j);
		return NULL;
	}
	return j;
}

void gb_jit__free(struct gb_jit *j)
{
	if (!j)
		return;
	gb_jit__ring_waker_stop(j);
	gb_jit__live_end(j); /* (nothing of the cache waits for gebpf any more) */
	free(j->u);
	free(j->in);
	free(j->st);
	free(j->hk);
	free(j->hv);
	free(j->en);
	free(j->want);
	free(j->cs);
	free(j->tk);
	free(j->tv);
	free(j->tf);
	free(j->tl);
	free(j->ts);
	free(j->twant);
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
	ns_setup(j);
}

static bool translatable(const struct gb_jit *j, const struct gb_insn *in)
{
	if (j->o.values) /* (vals.c: the mode with stops only) */
		return gb_jit__supported(in) && jit_vals_ok(in);
	return j->o.nostop ? gb_jit__nostop_supported(in) : gb_jit__supported(in);
}

/* --- emission --- */

uint64_t gb_jit__block(struct gb_jit *j, uint64_t pc, gb_jit_fetch_fn fetch, void *ctx)
{
	uint64_t have = jit_block_of(j, pc);
	if (have)
		return have;
	const struct gb_insn *first = inside(j, pc) ? fetch(ctx, pc) : NULL;
	if (!first || !translatable(j, first))
		return 0;
	size_t mark_u = j->nu, mark_in = j->nin, mark_used = j->em.used, mark_st = j->nst,
	       mark_want = j->nwant, mark_cs = j->ncs, mark_ts = j->nts;
	uint64_t head = gb_emit_here(&j->em);

	/* Budget check: leave (to this block's own address) when the ring may
	 * not hold one more block. */
	struct unit *h = jit_unit_add(j, U_HEAD, pc);
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
	jit_unit_end(j, h);
	if (!j->em.err && gb_emit_here(&j->em) != body)
		j->em.err = -EINVAL;

	struct link links[2];
	unsigned nlinks = 0, zero_recs = 0;
	uint64_t at = pc;
	for (unsigned n = 0; n < GB_JIT_BLOCK_INSNS && !j->em.err; n++) {
		const struct gb_insn *gi = n ? (inside(j, at) ? fetch(ctx, at) : NULL) : first;
		if (!gi || !translatable(j, gi))
			break;
		if (j->o.nostop && (gi->flags & GB_INSN_REP)) {
			/* a block of its own: one iteration per pass (rep.c) */
			if (!n && ns_rep(j, gi, head))
				j->em.err = j->em.err ? j->em.err : -EINVAL;
			zero_recs = !n;
			at = n ? gi->pc : gi->pc + gi->len;
			break;
		}
		if (j->o.nostop && ns_is_popf(gi))
			ns_popf_check(j, gi);
		int id = jit_one(j, gi, false);
		if (id < 0) {
			j->em.err = j->em.err ? j->em.err : -EINVAL;
			break;
		}
		struct unit *u = &j->u[j->nu - 1];
		uint64_t next = gi->pc + gi->len;
		if (j->o.nostop && gb_jit__emulated(gi)) {
			jit_unit_end(j, u);
			int r = ns_transfer(j, gi, &links[nlinks]);
			if (r < 0)
				j->em.err = j->em.err ? j->em.err : -EINVAL;
			nlinks += r > 0;
			at = 0;
			break;
		}
		if (j->o.nostop && gi->zi.mnemonic == ZYDIS_MNEMONIC_SYSCALL) {
			jit_unit_end(j, u);
			ns_syscall(j, gi);
			at = next;
			continue;
		}
		if (gb_jit__emulated(gi)) {
			/* gebpf performs it at the stub's stop; without gebpf
			 * the stub goes on to the original instruction */
			uint8_t words = u->words;
			jit_unit_end(j, u);
			jit_stub(j, gi->pc, UINT32_MAX, words);
			at = 0;
			break;
		}
		if ((gi->flags & GB_INSN_BRANCH) && gi->zi.meta.category != ZYDIS_CATEGORY_INTERRUPT) {
			uint64_t tgt = next + (uint64_t)gi->zi.raw.imm[0].value.s;
			uint32_t src = (uint32_t)gb_emit_jump(&j->em, gi->zi.mnemonic, gb_emit_here(&j->em));
			jit_unit_end(j, u);
			links[nlinks++] = (struct link){ gi->zi.mnemonic, tgt, src };
			at = gi->zi.mnemonic == ZYDIS_MNEMONIC_JMP ? 0 : next;
			break;
		}
		gb_emit_moved(&j->em, gi);
		jit_unit_end(j, u);
		if (j->o.values)
			jit_vals_post(j, gi, &j->in[id]);
		at = next;
	}
	/* Fall through (past a jcc, or the block's end) to the next address. */
	if (at) {
		struct unit *l = jit_unit_add(j, U_LINK, at);
		if (l) {
			uint32_t src = (uint32_t)gb_emit_jump(&j->em, ZYDIS_MNEMONIC_JMP, gb_emit_here(&j->em));
			jit_unit_end(j, l);
			links[nlinks++] = (struct link){ ZYDIS_MNEMONIC_JMP, at, src };
		}
	}
	/* Point the links at blocks, or at stubs (after the block's code). */
	for (unsigned k = 0; k < nlinks && !j->em.err; k++) {
		uint64_t dst = jit_block_of(j, links[k].target);
		if (!dst && j->o.nostop && !inside(j, links[k].target)) {
			dst = gb_emit_here(&j->em);
			struct unit *x = jit_unit_add(j, U_NS, links[k].target);
			if (!x)
				break;
			x->ns = GB_JIT_NS_EXIT;
			ns_leave(j, links[k].target);
			jit_unit_end(j, x);
		} else if (!dst) {
			dst = jit_stub(j, links[k].target, links[k].src, 0);
		}
		gb_emit_repoint(&j->em, links[k].src, dst);
	}
	uint64_t full_stub;
	if (j->o.nostop) { /* the ring's slow path, back to this head */
		full_stub = gb_emit_here(&j->em);
		ns_budget_exit(j, (uint32_t)(j->nin - mark_in - zero_recs), head, pc);
	} else {
		full_stub = jit_stub(j, pc, UINT32_MAX, 0);
	}
	if (!j->em.err)
		gb_emit_repoint(&j->em, full_src, full_stub);
	if (j->em.err || jit_block_put(j, pc, head)) {
		/* Out of room (or unencodable): nothing of it stays. */
		j->nu = mark_u;
		j->nin = mark_in;
		j->nst = mark_st;
		j->nwant = mark_want;
		j->ncs = mark_cs;
		j->nts = mark_ts;
		j->em.used = mark_used;
		j->em.err = 0;
		return 0;
	}
	j->stats.blocks++;
	if (j->o.nostop) {
		/* its records, a marker per re-acquire after a system call, and
		 * the marker of an entry taken just before its head */
		uint32_t words = 1;
		for (size_t k = mark_u; k < j->nu; k++)
			words += j->u[k].kind == U_INSN ? j->u[k].words :
				 j->u[k].kind == U_NS && j->u[k].ns == GB_JIT_NS_SYSCALL;
		ns_ring_block(j, words);
		ns_table_put(j, pc, head);
		ns_twin_want(j, pc); /* (its counting twin: twin.c) */
	}
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

void gb_jit__table_put(struct gb_jit *j, uint64_t pc)
{
	uint64_t blk = j->o.nostop ? jit_block_of(j, pc) : 0;
	if (blk)
		ns_table_put(j, pc, blk);
}

/* The blocks pending exits and return sites wait for, until none is new. */
static void translate_pending(struct gb_jit *j, gb_jit_fetch_fn fetch, void *ctx)
{
	for (bool more = true; more;) {
		more = false;
		for (size_t k = 0; k < j->nst; k++) {
			uint64_t t = j->st[k].target;
			if (!jit_block_of(j, t) && gb_jit__block(j, t, fetch, ctx)) {
				more = true;
				break; /* the list changed */
			}
		}
		for (size_t k = 0; k < j->nwant && !more; k++)
			if (!jit_block_of(j, j->want[k]) && gb_jit__block(j, j->want[k], fetch, ctx))
				more = true;
	}
}

/* The twin pass (twin.c), with the translator handed to it, until it
 * translates nothing new: a recording block it translates (the way on for
 * an instruction no twin counts) ends, as any, at an exit to the block after
 * it (its branch's targets, or the instruction after its 16th), and those
 * blocks (and their twins) must be made too, else a thread counting in the
 * twins after the budget runs them natively, uncounted: an in-range miss.
 * Returns the first pass's error (cleared); an error ends the passes, as it
 * only makes the counting slower (without room for twins the recording
 * blocks count). */
static int twins_closed(struct gb_jit *j, gb_jit_fetch_fn fetch, void *ctx)
{
	int first = 0;
	for (bool again = false;; again = true) {
		uint64_t before = j->stats.blocks;
		ns_twins(j, fetch, ctx, gb_jit__block);
		int e = j->em.err;
		j->stats.twin_full += e == -ENOSPC;
		j->em.err = 0;
		if (!again)
			first = e;
		if (e || j->stats.blocks == before)
			break;
		translate_pending(j, fetch, ctx);
		e = j->em.err;
		j->em.err = 0;
		if (e)
			break;
	}
	return first;
}

int gb_jit__translate_from(struct gb_jit *j, uint64_t pc, gb_jit_fetch_fn fetch, void *ctx)
{
	if (!gb_jit__block(j, pc, fetch, ctx))
		return -EINVAL;
	translate_pending(j, fetch, ctx);
	int e = j->em.err;
	/* counting twins (twin.c), once the first gb_jit__twins made them */
	if (j->tw_auto)
		(void)twins_closed(j, fetch, ctx);
	return e;
}

/* The twin pass (twin.c) with the translator handed to it, for the
 * recording blocks its to-recording entries enter; from now on it runs
 * after each translation too. */
int gb_jit__twins(struct gb_jit *j, gb_jit_fetch_fn fetch, void *ctx)
{
	j->tw_auto = j->o.twins;
	return twins_closed(j, fetch, ctx);
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

void gb_jit__stats(const struct gb_jit *j, struct gb_jit_stats *s) { *s = j->stats; }

uint64_t gb_jit__entry(struct gb_jit *j, uint64_t pc, gb_jit_fetch_fn fetch, void *ctx)
{
	return gb_jit__entry_len(j, pc, 5, fetch, ctx);
}

uint64_t gb_jit__entry_len(struct gb_jit *j, uint64_t pc, unsigned len, gb_jit_fetch_fn fetch,
			   void *ctx)
{
	if (!j->o.nostop)
		return 0;
	for (size_t k = 0; k < j->nen; k++)
		if (j->en[k].pc == pc)
			return j->en[k].addr;
	uint64_t blk = gb_jit__block(j, pc, fetch, ctx);
	uint64_t at = blk ? ns_entry_block(j, pc, len, blk, fetch, ctx) : 0;
	/* its twin (twin.c): made and published with nothing translated for
	 * the recording blocks (other threads may be running in them) */
	if (at && !j->em.err && j->tw_auto) {
		ns_twins(j, fetch, ctx, NULL);
		j->em.err = 0;
	}
	return at;
}

/* The other way in, gebpf's (jit.h): no entry block, the lock handed over
 * held, the block translated here and the marker its acquire would have
 * written put at the ring's head. */
uint64_t gb_jit__enter_held(struct gb_jit *j, unsigned k, uint64_t pc, gb_jit_fetch_fn fetch,
			    void *ctx)
{
	uint64_t blk = j->o.nostop && k < GB_JIT_TLS_COUNT ? gb_jit__block(j, pc, fetch, ctx) : 0;
	uint64_t h = *(volatile uint64_t *)dword(j, HEAD);
	if (!blk || h < j->m.data_addr || h + 8 > j->m.data_addr + GB_JIT_DATA_SIZE)
		return 0;
	/* (a block's budget counts one marker before its head: an entry's) */
	*(volatile uint64_t *)(j->m.data + (h - j->m.data_addr)) = NS_MARK | k;
	__atomic_store_n(dword(j, HEAD), h + 8, __ATOMIC_RELEASE);
	return blk;
}
