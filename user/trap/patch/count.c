/* The patch trap's counting mode (docs/trace.md "Counting after the
 * budget"): once the writer has written --max-events lines every further
 * line is only counted, so the cache's counting twins (user/jit/twin.c)
 * take over from the recording blocks: no lock, no record, the counts in
 * each thread's area.  gebpf turns the switch on at an idle (never with
 * --max-insns: its end must stay exact to the instruction), and adds what
 * the areas counted to the writer's counts (gb_jsonl__count_more) at each
 * idle, for a thread that exits (before its area is reused), before an
 * exec drops the cache, and at the end.  A thread already in a recording
 * stretch finishes it; its records are drained and counted as before. */
#include <errno.h>
#include <signal.h>
#include <sys/user.h>

#include "common/log.h"
#include "decode/decode.h"
#include "trace/cpu.h"
#include "trace/engine_int.h"
#include "trap/patch/patch.h"

void patch_count_area(struct patch_trap *pt, struct gb_engine *e, unsigned k)
{
	struct gb_jit_counts c;
	if (!pt->j || k >= GB_JIT_TLS_COUNT)
		return;
	gb_jit__count_take(pt->j, k, &c);
	if (pt->area_of[k] == AREA_UNTRACED || !(c.insns | c.reads | c.writes))
		return; /* (a vfork child's: untraced as under every trap) */
	gb_jsonl__count_more(e->out, c.insns, c.reads, c.writes, e->vt);
	e->vt += (uint64_t)c.insns;
	pt->counted += (uint64_t)c.insns;
}

void patch_count_all(struct patch_trap *pt, struct gb_engine *e)
{
	if (!pt->j || !pt->counting)
		return;
	for (unsigned k = 0; k < pt->nareas; k++)
		patch_count_area(pt, e, k);
}

/* The switch, at an idle, after a drain and between a drain's batches of
 * 4,096 records: a writer behind a busy ring sees no idle until the ring
 * is empty, and the program would go on recording lines that are only
 * dropped.  So it comes at most 4,096 records after the budget is full. */
void patch_count_switch(struct patch_trap *pt, struct gb_engine *e)
{
	if (pt->j && !pt->counting && pt->twins && !e->o.max_insns && gb_jsonl__full(e->out)) {
		pt->counting = true;
		gb_jit__counting(pt->j, true);
		gb_info("trace: the patch trap: the budget is full at vt %llu: counting from then "
			"on, no records", (unsigned long long)e->vt);
	}
}

void patch_count_idle(struct patch_trap *pt, struct gb_engine *e)
{
	if (!pt->j)
		return;
	patch_count_switch(pt, e);
	patch_count_all(pt, e);
	if (pt->counting)
		gb_jit__learn_exits(pt->j, pt->nareas);
}

/* Thread i, stopped by a synchronous fault (st) of the instruction a twin
 * ran at r->rip, was put at it (gb_jit__unwind took its counts back): its
 * exec and the accesses it completed count, as the line of a recorded
 * instruction that faults would (eng_fault_done). */
void patch_count_fault(struct patch_trap *pt, struct gb_engine *e, size_t i,
		       const struct user_regs_struct *r, const struct gb_stop *st, unsigned k)
{
	const struct gb_insn *gi = patch_fetch(pt, r->rip);
	struct gb_access acc[GB_MAX_ACCESSES];
	struct gb_cpu cpu;
	int n = 0;
	if (!gi)
		return;
	gb_cpu_from_regs(&cpu, r);
	(void)i;
	n = gb_insn_accesses(gi, &cpu, acc, GB_MAX_ACCESSES);
	if (n < 0)
		n = 0;
	int d = eng_fault_done(gi->pc, gi->len, acc, n, st, gi->pc);
	if (d < 0)
		return; /* not the instruction's own: it did not run */
	struct gb_jit_counts c = { 1, 0, 0 };
	for (int a = 0; a < d; a++)
		*(acc[a].write ? &c.writes : &c.reads) += 1;
	gb_jit__count_add(pt->j, k, &c);
}

/* The end's statistics (-v) and what makes the trace inexact. */
void patch_report(struct patch_trap *pt)
{
	struct gb_jit_stats js = { 0 };
	patch_collect_misses(pt, true);
	if (pt->j)
		gb_jit__stats(pt->j, &js);
	gb_info("trace: the patch trap: %llu entries, %llu in-range misses, %llu signals taken "
		"out of the cache, %llu records, %llu blocks translated (%llu instructions), images "
		"set up: %u", (unsigned long long)pt->marks, (unsigned long long)pt->misses,
		(unsigned long long)pt->handled, (unsigned long long)pt->records,
		(unsigned long long)(pt->blocks + js.blocks),
		(unsigned long long)(pt->tinsns + js.insns), pt->images);
	struct gb_jit_ring_state rs = { 0 };
	if (pt->j)
		gb_jit__ring_state(pt->j, &rs);
	if (rs.dropping) /* (jit/ring.c: its writer waited ring_timeout_ms for gebpf in vain) */
		gb_warn("trace: the patch trap: the code cache's ring dropped %llu records (gebpf did "
			"not drain it in time): the trace and its counts are short of them",
			(unsigned long long)rs.dropped);
	if (pt->later)
		gb_info("trace: the patch trap: %llu asynchronous signals taken at a later instruction "
			"(they stopped a thread inside a patch's bytes; %llu put off too often: taken at "
			"the native copy of its instructions)", (unsigned long long)pt->later,
			(unsigned long long)pt->later_native);
	if (pt->counting)
		gb_info("trace: the patch trap: %llu instructions counted by the counting twins "
			"after the budget (%llu twins; the flags live at the start of %llu of %llu "
			"blocks, their adds moved to where the flags are dead in %llu)",
			(unsigned long long)pt->counted, (unsigned long long)js.twins,
			(unsigned long long)js.twin_heads_live, (unsigned long long)js.twin_heads,
			(unsigned long long)js.twin_heads_moved);
	if (pt->misses)
		gb_warn("trace: the patch trap: %llu in-range misses (targets not translated up front): "
			"each missed stretch ran natively until the next entry, the trace is not exact "
			"there", (unsigned long long)pt->misses);
}
