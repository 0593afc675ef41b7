/* The patch trap's ground floor (trap/patch/patch.h lists its layers):
 * what every other file of the trap uses, calling none of them.  The
 * range's original instructions (patch_fetch), the cache's entry blocks,
 * its ring drained into lines, the guard of the instructions under the
 * patches, the threads' areas, and the patches' bytes. */
#include <errno.h>
#include <stdlib.h>

#include "common/bound.h"
#include "common/guard.h"
#include "common/log.h"
#include "decode/decode.h"
#include "jit/jit.h"
#include "jit/patch.h"
#include "ptrace/mem.h"
#include "ptrace/procfs.h"
#include "trace/engine_int.h"
#include "trap/patch/patch.h"

/* A thread's patch-trap state (its ethread's trap area). */
static struct patch_thread *pth_of(struct ethread *t) { return (void *)t->trap; }

/* The decoded instructions of patch_fetch, one entry per pc, chained by a
 * hash of the pc; an entry never moves or goes before patch_insns_free. */
#define INSNS_BUCKETS 4096u

struct insn_entry {
	struct insn_entry *next;
	struct gb_insn in;
};

struct patch_insns {
	struct insn_entry *bucket[INSNS_BUCKETS];
};

static unsigned insn_hash(uint64_t pc)
{
	return (unsigned)((pc * 0x9e3779b97f4a7c15ull) >> 52) & (INSNS_BUCKETS - 1);
}

/* The place of pc's instruction (new: *fresh), or NULL (no memory). */
static struct insn_entry *insn_place(struct patch_trap *pt, uint64_t pc, bool *fresh)
{
	*fresh = false;
	if (!pt->insns && !(pt->insns = calloc(1, sizeof(*pt->insns))))
		return NULL;
	struct insn_entry **head = &pt->insns->bucket[insn_hash(pc)];
	for (struct insn_entry *x = *head; x; x = x->next)
		if (x->in.pc == pc)
			return x;
	struct insn_entry *x = calloc(1, sizeof(*x));
	if (!x)
		return NULL;
	x->in.pc = pc;
	x->next = *head;
	*head = x;
	*fresh = true;
	return x;
}

const struct gb_insn *patch_fetch(void *ctx, uint64_t pc)
{
	struct patch_trap *pt = ctx;
	uint8_t b[GB_INSN_MAX_LEN];
	const uint8_t *at = b;
	bool in_range = patch_in_range(pt, pc), fresh;
	struct insn_entry *x = insn_place(pt, pc, &fresh);
	if (!x)
		return NULL;
	if (in_range && !fresh)
		return x->in.pc == pc && x->in.len ? &x->in : NULL; /* (decoded before) */
	if (in_range)
		at = pt->code + (pc - pt->start); /* the original bytes, patched or not */
	else if (gb_mem_read(pt->pid, pc, b, sizeof(b)) <= 0)
		return NULL;
	struct gb_insn in;
	if (gb_decode(pc, at, GB_INSN_MAX_LEN, &in)) {
		if (in_range)
			x->in.len = 0; /* (not an instruction: NULL again next time) */
		return NULL;
	}
	x->in = in;
	return &x->in;
}

void patch_insns_free(struct patch_trap *pt)
{
	if (!pt->insns)
		return;
	for (unsigned k = 0; k < INSNS_BUCKETS; k++)
		for (struct insn_entry *x = pt->insns->bucket[k], *next; x; x = next) {
			next = x->next;
			free(x);
		}
	free(pt->insns);
	pt->insns = NULL;
}

/* The held record (patch.h) becomes a line (fault: its instruction raised that signal, its
 * completed accesses only), up to --max-insns. */
static void commit_held(struct patch_trap *pt, struct gb_engine *e, const struct gb_stop *fault,
			struct ethread *t)
{
	struct gb_jit_rec *h = &pt->recs[pt->held_slot];
	if (!pt->has_held)
		return;
	pt->has_held = false;
	if (eng_max_insns_done(e)) {
		eng_finish(e, GB_END_MAX_INSNS);
		return;
	}
	int n = h->nacc;
	if (fault) {
		int d = eng_fault_done(h->pc, h->len, h->acc, h->nacc, fault, h->pc);
		n = d >= 0 ? d : h->nacc;
	}
	/* (t: held_i's, when the drain knows it) */
	eng_commit_t(e, (size_t)pt->held_i, t ? t : eng_th(e, (size_t)pt->held_i), h->pc, h->acc, n);
	pt->records++;
}

/* The ring's records become lines (each stretch its thread's), the last
 * one held back unless settled (trap/patch/patch.h): the writer puts an
 * instruction's record in the ring before running it, so while a thread may
 * be in a stretch the last record can still fault (its faulting access
 * must not be a line) or be taken back.  fault: the last record's
 * instruction raised this signal, its thread is stopped at it. */
void patch_drain_fault(struct patch_trap *pt, struct gb_engine *e, const struct gb_stop *fault,
			bool settled)
{
	int r;
	size_t n = 0;
	if (!pt->j)
		return;
	gb_jsonl__batch(e->out, true);
	struct gb_jit_rec *rec = &pt->recs[pt->held_slot ^ 1];  /* (the held one stays) */
	struct patch_thread *th = NULL; /* cur_i's, looked up again when it changes */
	struct ethread *et = NULL, *held_t = NULL; /* ... its ethread; the held record's */
	ssize_t th_i = -2;
	while ((r = gb_jit__ring_poll(pt->j, &pt->cur, rec)) == 1) {
		if (rec->kind == GB_JIT_REC_MARK) {
			pt->marks++; /* an acquisition of the lock: an entry */
			pt->cur_i = rec->area < GB_JIT_TLS_COUNT ? pt->area_of[rec->area] : -1;
			continue;
		}
		if (pt->cur_i == AREA_UNTRACED)
			continue; /* a vfork child's, untraced as under every trap */
		if (pt->cur_i < 0) {
			gb_err("trace: the code cache's ring holds a stretch of no known thread");
			eng_finish(e, GB_END_ERROR);
			break;
		}
		if (th_i != pt->cur_i) {
			et = eng_th(e, (size_t)pt->cur_i);
			th = pth_of(et);
			th_i = pt->cur_i;
		}
		if (th->skip && th->skip_pc == rec->pc) {
			th->skip = false; /* (recorded before a restart) */
			continue;
		}
		commit_held(pt, e, NULL, held_t);
		if (e->ended && eng_max_insns_done(e))
			break;
		pt->held_slot ^= 1; /* rec is held now; the next is read into the other */
		rec = &pt->recs[pt->held_slot ^ 1];
		pt->held_i = pt->cur_i;
		held_t = et;
		pt->has_held = true;
		if (++n % 4096 == 0) {
			gb_jit__ring_commit(pt->j, &pt->cur);
			patch_count_switch(pt, e); /* (trap/patch/count.c) */
			th_i = -2; /* (the threads' array may have grown meanwhile) */
			held_t = NULL;
		}
	}
	if (fault || settled)
		commit_held(pt, e, fault, held_t);
	gb_jit__ring_commit(pt->j, &pt->cur);
	patch_count_switch(pt, e);
	gb_jsonl__batch(e->out, false);
	if (r < 0) {
		gb_err("trace: the code cache's ring holds a record gebpf did not write");
		eng_finish(e, GB_END_ERROR);
	}
}

void patch_drain(struct patch_trap *pt, struct gb_engine *e, bool settled)
{
	patch_drain_fault(pt, e, NULL, settled);
}

/* In-range misses (a lookup, or an exit to a target not translated up
 * front): counted, and their targets translated so the next ones are
 * traced; the missed stretches ran natively, unrecorded.  Only with the
 * lock taken (within PATCH_LOCK_US; held: again at the next idle), no
 * thread recording then;
 * at the end (held: every thread stopped, out of the cache) only counted. */
void patch_collect_misses(struct patch_trap *pt, bool held)
{
	static struct gb_jit_misses m;
	if (!pt->j)
		return;
	gb_jit__misses(pt->j, &m, false); /* (a peek at the count) */
	if (!m.count || (!held && gb_jit__lock_try_for(pt->j, PATCH_LOCK_US) != 1))
		return;
	gb_jit__misses(pt->j, &m, true);
	pt->misses += m.count;
	for (size_t k = 0; k < m.n && k < 8; k++) /* (-v: where, to see why) */
		gb_info("trace: the patch trap: an in-range miss at 0x%llx%s",
			(unsigned long long)m.pc[k], held ? " (at the end)" : "");
	for (size_t k = 0; !held && k < m.n; k++)
		if (patch_in_range(pt, m.pc[k]) && gb_jit__translate_from(pt->j, m.pc[k], patch_fetch, pt))
			gb_warn("trace: the patch trap: 0x%llx (missed) does not translate",
				(unsigned long long)m.pc[k]);
	if (!held && m.n) {
		patch_guard_inside(pt, false); /* none of them evicted by those */
		gb_jit__ways(pt->j);
	}
	if (!held)
		gb_jit__lock_release(pt->j);
}

bool patch_caught(pid_t pid, int sig)
{
	uint64_t cgt = 0;
	return gb_proc_status_num(pid, "SigCgt", 16, &cgt) == 0 && sig >= 1 && sig <= 64 &&
	       (cgt >> (sig - 1) & 1);
}

uint64_t patch_entry_of(struct patch_trap *pt, uint64_t pc)
{
	/* (a short jump's entry block: its native copy covers its 2 bytes'
	 * instructions only, jit.h gb_jit__entry_len) */
	size_t k = GB_LOWER(pt->plan.v, pt->plan.n, addr, pc);
	unsigned len = k < pt->plan.n && pt->plan.v[k].addr == pc && pt->plan.v[k].why == GB_PATCH_OK
			       ? pt->plan.v[k].len : GB_PATCH_LEN;
	return gb_jit__entry_len(pt->j, pc, len, patch_fetch, pt);
}

int patch_area_new(struct patch_trap *pt)
{
	if (pt->nfreed)
		return (int)pt->freed[--pt->nfreed];
	return pt->nareas < GB_JIT_TLS_COUNT ? (int)pt->nareas++ : -1;
}

/* An instruction under a patch's bytes must never run natively (it would
 * run the jump's tail), and a lookup can reach one (an indirect target): each
 * gets a block (translate: in a range not translated whole, where the
 * entries' closure may not reach it) and is put in the lookup table after
 * every other block, so none sharing its 16-bit slot's chain evicts it (a
 * full chain of 8 still does; the later wins).  Again after each translation of
 * missed targets (collect_misses).  0, or -ENOSPC. */
int patch_guard_inside(struct patch_trap *pt, bool translate)
{
	for (size_t k = 0; k < pt->plan.n; k++) {
		const struct gb_patch *p = &pt->plan.v[k];
		for (unsigned i = 1; p->why == GB_PATCH_OK && i < p->ninsns; i++) {
			if (translate && gb_jit__translate_from(pt->j, p->insn[i], patch_fetch, pt))
				return -ENOSPC;
			gb_jit__table_put(pt->j, p->insn[i]);
		}
	}
	return 0;
}

/* One place's bytes (logged first for the guard when they are the patch's). */
static void write_place(struct patch_trap *pt, pid_t pid, uint64_t at, const uint8_t *orig,
			const uint8_t *bytes, unsigned len, bool back)
{
	if (!back && pid == pt->pid) /* (common/guard.h) */
		gb_guard_undo_add(pid, at, orig, len);
	if (gb_mem_write(pid, at, back ? orig : bytes, len) != (ssize_t)len)
		gb_warn("trace: pid %d: cannot write the %s bytes at 0x%llx", pid,
			back ? "original" : "patch", (unsigned long long)at);
}

/* A 2-byte patch's trampoline is written before its jump and taken back
 * after it, so that the jump never leads to nops that lead back to it: a
 * worker killed between the two leaves a trampoline that only stands for
 * its nops (jit/patch.h). */
void patch_write(struct patch_trap *pt, pid_t pid, bool orig)
{
	for (size_t k = 0; k < pt->plan.n; k++) {
		const struct gb_patch *p = &pt->plan.v[k];
		if (p->why != GB_PATCH_OK)
			continue;
		if (p->tramp && !orig)
			write_place(pt, pid, p->tramp, p->tramp_orig, p->tramp_bytes, GB_PATCH_LEN, false);
		write_place(pt, pid, p->addr, p->orig, p->bytes, p->len, orig);
		if (p->tramp && orig)
			write_place(pt, pid, p->tramp, p->tramp_orig, p->tramp_bytes, GB_PATCH_LEN, true);
		if (orig && pid == pt->pid)
			gb_guard_test_point("end-restore"); /* (test only: common/guard.h) */
	}
	if (orig && pid == pt->pid) {
		gb_guard_test_point("end-restored");
		gb_guard_undo_clear();
		gb_guard_test_point("end-cleared");
	}
}
