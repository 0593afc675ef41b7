/* Counting twins (docs/trace.md "Counting after the budget"): once the
 * trace's --max-events budget is full, gebpf only counts what the range
 * runs.  Each translated block gets a twin that runs the same original
 * instructions (gb_emit_moved) with no record, no lock and no ring, and
 * adds at its head the block's counts (instructions, reads, writes: known
 * when it is translated, each instruction's access plan) to counters in
 * the thread's own area (gs-relative: no two threads share one):
 *
 *   head:  add qword gs:[T_BLK + 8b], 1
 *          (a counter of the block's own, for the first NS_BSLOTS twins:
 *          gebpf weighs it by the block's counts; after them, the counts
 *          themselves: add qword gs:[T_CSET(s)], n ; add gs:[+8], r ;
 *          add gs:[+16], w), where the flags are dead at the head: each
 *          status flag written before any is read, Zydis's cpu_flags; else
 *          flag-free: mov gs:[T_TWS], rax ; mov rax, gs:[C] ;
 *          lea rax, [rax+n] ; mov gs:[C], rax ... ; mov rax, gs:[T_TWS])
 *          <the instructions>
 *
 * Twins link to twins (a jcc/jmp rel32 to the target's twin, a fall-through
 * jump, a call pushing the ORIGINAL return address as the recording blocks
 * do), leave the range by plain jumps (no lock to release), and look ret
 * and indirect targets up in the recording blocks' table (its third
 * column, ibl.c; a miss inside the range is counted and logged at
 * NS_TMISSES / NS_TMISSLOG and goes on natively, as a recording lookup's
 * does).  A system call is the call, then rcx the original return address
 * and a jump to the twin of what follows (so a clone's child counts from
 * there in its own area).  An instruction a twin cannot count exactly (a
 * REP string instruction, a gather, a sign-masked move, popf, ud2/hlt/int)
 * ends the twin before it, and the twin of its address takes the lock and
 * enters its recording block (a "to-recording" entry: a U_NS entry unit
 * without owner check, unwound as an entry): its records are drained and
 * counted by gebpf as before.
 *
 * Twins are made by a pass (ns_twins) over every block and wanted pc that
 * has none: each twin's code is complete and every jump of it resolved
 * before it is published (the table's twin column, the acquire sites'
 * words: lock.c's twin_check), and never changes after, so gebpf can make
 * more while other threads run in the twins made before.  The switch is
 * NS_COUNT (gb_jit__counting).  Unwinding (twin_unwind.c) puts a thread
 * stopped in a twin at its original instruction and takes back the counts
 * of what it has not run.
 *
 * This file is the pass, its publishing and the exits learned for the
 * twins' lookups; the twin of one block (its head, a tight loop's copies,
 * a to-recording entry) is twin_block.c's, a twin's ways out (links,
 * calls, lookups, misses) twin_link.c's, and the pc -> twin map
 * twin_map.c's. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "jit/internal.h"
#include "jit/twin.h"

/* Twins are made while the code region is less full than this (percent):
 * the rest is kept for the recording blocks, which a trace cannot do
 * without (a range of 8,000 10-byte instructions, each translated as a
 * block of up to 16: tests/progs/pt_slot, 6.5 of its 7 MiB) made later
 * (a missed target, a re-entry), and a set-up makes its twins after its
 * blocks (gb_jit__twins). */
#define TW_ROOM_PCT 85

/* --- the pass --- */

static uint64_t *tbl_view(const struct gb_jit *j)
{
	return (uint64_t *)(j->m.code + (j->tbl - j->m.code_addr));
}

/* The table's twin column of pc's slot (a lookup finds it from now on). */
static void table_twin(struct gb_jit *j, uint64_t pc, uint64_t twin)
{
	uint64_t *t = tbl_view(j);
	size_t i = pc & (NS_TBL_ENTRIES - 1);
	for (unsigned k = 0; k <= NS_TBL_PROBES; k++, i = (i + 1) & (NS_TBL_ENTRIES - 1))
		if (t[i] == -pc) {
			__atomic_store_n(&ns_twcol(j)[i], twin, __ATOMIC_RELEASE);
			return;
		}
}

/* A new twin's jump (its rel32 at src) to t.  A jmp to the very next
 * byte (a block's fall-through, its twin made right after it) becomes a
 * 5-byte nop: one taken branch a block less (node's deflate_fast: most
 * of its blocks).  Before the twin is published: nothing runs it yet. */
static void link(struct gb_jit *j, size_t src, uint64_t t)
{
	uint8_t *b = j->em.buf + src - 1;
	if (t == j->em.base + src + 4 && *b == 0xe9) {
		static const uint8_t nop5[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
		memcpy(b, nop5, sizeof(nop5));
		return;
	}
	gb_emit_repoint(&j->em, src, t);
}

/* Forget the twins of this pass (none was published): the map rebuilt
 * without them; their code stays, dead. */
static void forget_new(struct gb_jit *j)
{
	size_t cap = j->tcap;
	uint64_t *k = j->tk, *v = j->tv;
	uint8_t *f = j->tf;
	j->tk = NULL;
	j->tv = NULL;
	j->tf = NULL;
	j->tcap = j->tn = 0;
	for (size_t i = 0; i < cap; i++)
		if (k[i] && !(f[i] & TW_F_NEW))
			ns_twin_put(j, k[i], v[i], f[i]);
	free(k);
	free(v);
	free(f);
}

void ns_twin_want(struct gb_jit *j, uint64_t pc)
{
	if (j->o.nostop && j->o.twins && ns_twin_want_add(j, pc))
		j->em.err = -ENOMEM;
}

void ns_twins(struct gb_jit *j, gb_jit_fetch_fn fetch, void *ctx, jit_block_fn translate)
{
	if (!j->o.nostop || !j->o.twins || j->em.err)
		return;
	/* the work: blocks translated since the last pass (gb_jit__block
	 * wants them), and acquire sites made since */
	if (j->nts_seen > j->nts)
		j->nts_seen = j->nts;
	for (size_t k = j->nts_seen; k < j->nts; k++)
		if (!ns_twin_of(j, j->ts[k].pc, NULL) && ns_twin_want_add(j, j->ts[k].pc))
			return;
	bool sites = j->nts_seen < j->nts;
	j->nts_seen = j->nts;
	const unsigned nbs0 = j->nbs; /* (a pass forgotten gives its block counters back) */
	j->ntl = 0;
	uint64_t *failed = NULL, *made = NULL;
	size_t nfailed = 0, capfailed = 0, nmade = 0, capmade = 0;
	bool deferred = false;
	while (j->ntwant && !j->em.err) {
		uint64_t pc = j->twant[--j->ntwant];
		bool tried = false;
		for (size_t k = 0; k < nfailed; k++)
			tried |= failed[k] == pc;
		if (tried || ns_twin_of(j, pc, NULL))
			continue;
		if (j->em.used > j->em.size / 100 * TW_ROOM_PCT) {
			/* the rest of the code region is the recording blocks':
			 * these keep recording (nothing of the pass published) */
			deferred = true;
			ns_twin_want_add(j, pc);
			j->stats.twin_full++;
			break;
		}
		uint8_t f = 0;
		uint64_t t = ns_twin_block(j, pc, fetch, ctx, translate, &f);
		if (j->em.err)
			break;
		if (!t && !translate && f == TW_F_TOREC) {
			/* its recording block is not translated yet: the pass
			 * waits for one that may translate it (nothing of it
			 * published; its work kept) */
			deferred = true;
			ns_twin_want_add(j, pc);
			break;
		}
		int e = 0;
		if (t && !(e = ns_twin_put(j, pc, t, f | TW_F_NEW)) &&
		    !(e = GB_GROW(&made, &capmade, nmade + 1)))
			made[nmade++] = pc;
		else if (!t && !(e = GB_GROW(&failed, &capfailed, nfailed + 1)))
			failed[nfailed++] = pc;
		if (e)
			j->em.err = -ENOMEM;
	}
	if (deferred) {
		for (size_t k = 0; k < nmade; k++)
			ns_twin_want_add(j, made[k]);
		free(failed);
		free(made);
		j->ntl = 0;
		j->nbs = nbs0;
		forget_new(j);
		return;
	}
	/* every jump of the new twins resolved: to a twin, or counted as a
	 * miss */
	for (size_t k = 0; k < j->ntl && !j->em.err; k++) {
		uint64_t t = ns_twin_of(j, j->tl[k].target, NULL);
		if (!t)
			t = ns_twin_miss_stub(j, j->tl[k].target);
		if (t)
			link(j, j->tl[k].src, t);
	}
	free(failed);
	j->ntl = j->ntwant = 0;
	if (j->em.err) {
		free(made);
		j->nbs = nbs0;
		forget_new(j);
		return; /* (em.err stays: the caller's) */
	}
	/* published: the table's column, the acquire sites' words */
	for (size_t k = 0; k < nmade; k++) {
		uint8_t f = 0;
		uint64_t t = ns_twin_of(j, made[k], &f);
		ns_twin_put(j, made[k], t, (uint8_t)(f & ~TW_F_NEW));
		j->stats.twins += f == (TW_F_TWIN | TW_F_NEW);
		table_twin(j, made[k], t);
	}
	free(made);
	for (size_t k = 0; (nmade || sites) && k < j->nts; k++) {
		uint64_t *w = (uint64_t *)(j->m.code + j->ts[k].off);
		uint64_t t = gb_jit__twin(j, j->ts[k].pc);
		if (t && *w == j->m.code_addr + j->ts[k].off + 8) /* (still its own way on) */
			__atomic_store_n(w, t, __ATOMIC_RELEASE);
	}
}

/* A target out of the range that lookups leave for often (a ret to the
 * range's callers): a key of the table whose twin is the target itself and
 * whose recording block is an exit (the lock released, then the jump), so
 * that a twin's lookup finds it without its miss path (flags saved, the
 * probe chain, the range's bounds).  Only into a free home slot: never
 * evicting a block of the range. */
unsigned gb_jit__learn_exits(struct gb_jit *j, unsigned nareas)
{
	unsigned n = 0;
	if (!j->o.nostop || !j->o.twins)
		return 0;
	uint64_t *t = tbl_view(j);
	for (unsigned k = 0; k < nareas && k < GB_JIT_TLS_COUNT; k++) {
		uint64_t *w = (uint64_t *)(j->m.data + NS_TLS + (size_t)k * GB_JIT_TLS_SIZE + T_EXIT);
		uint64_t pc = __atomic_exchange_n(w, 0, __ATOMIC_ACQ_REL);
		size_t i = pc & (NS_TBL_ENTRIES - 1);
		if (!pc || inside(j, pc) || t[i])
			continue;
		uint64_t at = gb_emit_here(&j->em);
		struct unit *x = jit_unit_add(j, U_NS, pc);
		if (!x)
			break;
		x->ns = GB_JIT_NS_EXIT;
		ns_leave(j, pc);
		jit_unit_end(j, x);
		if (j->em.err) {
			j->em.err = 0;
			break;
		}
		t[NS_TBL_ENTRIES + i] = at;
		ns_twcol(j)[i] = pc;
		__atomic_store_n(&t[i], -pc, __ATOMIC_RELEASE); /* (after its columns) */
		n++;
	}
	j->stats.exits_learned += n;
	return n;
}
