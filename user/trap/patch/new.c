/* The patch trap's set-up (docs/trace.md "The patch trap"): whether it
 * applies to the stopped target, the cache mapped, the range translated up
 * front, the patches planned; and its start, once the engine has every
 * thread stopped (threads given areas, the patches written).  The hooks
 * are trap/patch/trap.c's. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <unistd.h>

#include "common/bound.h"
#include "common/grow.h"
#include "common/log.h"
#include "ptrace/maps.h"
#include "ptrace/mem.h"
#include "ptrace/regs.h"
#include "ptrace/tracee.h"
#include "record/jsonl.h"
#include "sym/codeptrs.h"
#include "sym/elfsyms.h"
#include "sym/entries.h"
#include "trace/engine_int.h"
#include "trap/patch/leftover.h"
#include "trap/patch/patch.h"
#include "trap/probes/probes.h"

#define PT(t) ((struct patch_trap *)(t))

static struct patch_thread *pth(struct gb_engine *e, size_t i) { return eng_trap_priv(e, i); }
#include "trap/traps.h"

/* Ranges of at most this many instructions get a block from each. */
#define PATCH_EVERY 8192

/* Why the trap does not apply to t now (NULL: it may), before anything is
 * done to the target. */
#ifndef HWCAP2_FSGSBASE
#define HWCAP2_FSGSBASE (1 << 1)
#endif

/* The target's memory, for the cache's unwinding (jit.h gb_jit_opts.read). */
static int read_target(void *ctx, uint64_t addr, void *buf, size_t n)
{
	return gb_mem_read(((struct patch_trap *)ctx)->pid, addr, buf, n) == (ssize_t)n ? 0 : -1;
}

static const char *refuse(const struct gb_tracee *t, char *buf, size_t len)
{
	size_t live = 0;
	struct gb_leftovers lo = { 0 };
	bool looked = false;
	for (size_t i = 0; i < t->nthreads; i++) {
		struct user_regs_struct r;
		if (t->threads[i].exited)
			continue;
		live++;
		if (gb_regs_get(t->threads[i].tid, &r) || !r.gs_base)
			continue;
		/* a gs base an earlier gebpf's cache gave it is not the program's
		 * (trap/patch/leftover.h): the thread gets its area in this one */
		if (!looked)
			looked = !gb_leftovers_find(t->pid, &lo);
		if (gb_leftovers_at(&lo, r.gs_base))
			continue;
		snprintf(buf, len, "thread %d uses its gs base", t->threads[i].tid);
		return buf;
	}
	for (size_t k = 0; k < lo.n; k++)
		if (lo.v[k].inside) {
			snprintf(buf, len, "%u threads run in the code cache an earlier gebpf left at "
				 "0x%llx (they leave it by themselves)", lo.v[k].inside,
				 (unsigned long long)lo.v[k].code);
			return buf;
		}
	if (live > GB_JIT_TLS_COUNT) {
		snprintf(buf, len, "%zu threads (at most %u)", live, GB_JIT_TLS_COUNT);
		return buf;
	}
	return NULL;
}

/* The range's instructions, decoded in order from its original bytes:
 * each translatable (else why). */
static const char *sweep(struct patch_trap *pt, struct gb_insn **out, size_t *n, char *buf,
			 size_t len)
{
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	for (uint64_t a = pt->start; a <= pt->end;) {
		if (GB_GROW(out, &cap, *n + 1))
			return "out of memory";
		struct gb_insn *in = &(*out)[*n];
		if (gb_decode(a, pt->code + (a - pt->start), GB_INSN_MAX_LEN, in) ||
		    !gb_jit__nostop_supported(in)) {
			snprintf(buf, len, "the instruction at 0x%llx cannot run translated",
				 (unsigned long long)a);
			return buf;
		}
		a += in->len;
		++*n;
	}
	return NULL;
}

static bool insn_start(const struct gb_insn *ins, size_t n, uint64_t pc)
{
	size_t i = GB_LOWER(ins, n, pc, pc);
	return i < n && ins[i].pc == pc;
}

/* The instruction starts of the range whose address the module's data
 * holds (sym/codeptrs.h), run-time addresses in *v (ascending; *n 0 when
 * there are none or they cannot be read). */
static void code_pointers(const char *path, uint64_t lo, uint64_t hi, uint64_t bias,
			  const struct gb_insn *ins, size_t nins, uint64_t **v, size_t *n)
{
	size_t m = 0;
	int r = gb_codeptrs_find(path, lo, hi, v, n);
	if (r) {
		gb_info("patch trap: %s: no code addresses from its data: %s", path, strerror(-r));
		*v = NULL;
		*n = 0;
		return;
	}
	for (size_t k = 0; k < *n; k++)
		if (insn_start(ins, nins, (*v)[k] + bias))
			(*v)[m++] = (*v)[k] + bias;
	*n = m;
	gb_info("patch trap: %zu addresses of the range in %s's data", m, path);
}

/* A block from each of them: the up-front translation's closure does not
 * reach indirect targets, which would miss. */
static const char *from_code_pointers(struct patch_trap *pt, const uint64_t *v, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (gb_jit__translate_from(pt->j, v[k], patch_fetch, pt) == -ENOSPC)
			return "the code cache is full";
	return NULL;
}

/* The bytes between the end of the function before the range and its
 * start (jit/patch.h gb_patch_in.pre: nops there may hold a trampoline),
 * from the module's symbols (its debug file's too): *n of them into buf
 * (at most max), from *pre_lo (run-time); 0 when a function symbol runs
 * into the start (the range cuts it) or none is known. */
static size_t pre_bytes(pid_t pid, const char *path, uint64_t lo, uint64_t bias, uint8_t *buf,
			size_t max, uint64_t *pre_lo)
{
	struct gb_elfsyms es;
	uint64_t end = 0;
	bool cut = false;
	if (gb_elfsyms_load(path, &es) == 0) {
		for (size_t k = 0; k < es.nsyms && es.syms[k].value < lo; k++) {
			const struct gb_elfsym *y = &es.syms[k];
			if (!y->func || !y->size)
				continue;
			if (y->value + y->size > lo)
				cut = true;
			else if (y->value + y->size > end)
				end = y->value + y->size;
		}
	}
	gb_elfsyms_free(&es);
	if (cut || !end || lo - end > max)
		return 0;
	*pre_lo = end + bias;
	ssize_t got = gb_mem_read(pid, *pre_lo, buf, (size_t)(lo - end));
	return got == (ssize_t)(lo - end) ? (size_t)got : 0;
}

/* The decoded instruction at pc (ins ascending), or NULL. */
static const struct gb_insn *patch_insn_at(const struct gb_insn *ins, size_t nins, uint64_t pc)
{
	size_t i = GB_LOWER(ins, nins, pc, pc);
	return i < nins && ins[i].pc == pc ? &ins[i] : NULL;
}

/* The plan over the range's entries, each translated; the first refusal's
 * reason. */
static const char *plan(struct patch_trap *pt, const char *path, uint64_t lo, uint64_t hi,
			uint64_t bias, const struct gb_insn *ins, size_t nins, char *buf, size_t len)
{
	struct gb_entries en = { 0 };
	struct gb_maps m;
	struct gb_patch_map *pm = NULL;
	uint64_t *ev = NULL, *cp = NULL;
	size_t ncp = 0;
	const char *why = NULL;
	if (gb_entries_find(path, lo, hi, &en, NULL)) {
		why = "the range's entries cannot be found";
		goto out;
	}
	if (gb_maps_read(pt->pid, &m)) {
		why = "no memory map";
		goto out;
	}
	/* Code addresses of the range: no patch over one (the planner), and
	 * in a large range a block from each (below). */
	code_pointers(path, lo, hi, bias, ins, nins, &cp, &ncp);
	pm = calloc(m.n + 1, sizeof(*pm));
	ev = calloc(en.n + 1, sizeof(*ev));
	for (size_t k = 0; pm && k < m.n; k++)
		pm[k] = (struct gb_patch_map){ m.v[k].start, m.v[k].end,
					       (m.v[k].prot & PROT_WRITE) != 0 };
	uint8_t pre[2 * GB_PATCH_PAD_MAX];
	struct gb_patch_in in = { pt->start, pt->end, ev, en.n, ins, nins, pm, m.n, pt->map.addr,
				  pt->map.addr + GB_JIT_CODE_SIZE, cp, ncp, true, 0, pre, 0 };
	for (size_t k = 0; ev && k < en.n; k++)
		ev[k] = en.v[k].vaddr + bias;
	if (!pm || !ev || gb_patch_plan(&in, &pt->plan))
		why = "out of memory";
	/* The range's start refused and no nops of the range for a short
	 * jump's trampoline: the bytes before it, from the module's symbols
	 * (read only then: the target is stopped), and the plan again. */
	const struct gb_patch *p0 = !why && pt->plan.n ? &pt->plan.v[0] : NULL;
	if (p0 && p0->addr == pt->start && p0->why != GB_PATCH_OK && p0->why_other == GB_PATCH_NO_PAD &&
	    (in.npre = pre_bytes(pt->pid, path, lo, bias, pre, sizeof(pre), &in.pre_lo))) {
		gb_patch_plan_free(&pt->plan);
		if (gb_patch_plan(&in, &pt->plan))
			why = "out of memory";
	}
	gb_maps_free(&m);
	/* Jump tables and other indirect targets inside the range: a block
	 * from every instruction (a lookup that misses runs on natively). */
	for (size_t k = 0; !why && nins <= PATCH_EVERY && k < nins; k++)
		if (gb_jit__translate_from(pt->j, ins[k].pc, patch_fetch, pt)) {
			why = "the code cache is full";
			break;
		}
	/* Larger: from the addresses of the range the file's data holds (a
	 * computed goto's table of labels: Python's bytecode loop). */
	if (!why && nins > PATCH_EVERY)
		why = from_code_pointers(pt, cp, ncp);
	/* An entry the planner refuses keeps a uprobe (trap/patch/probe.c). */
	size_t nref = 0;
	for (size_t k = 0; !why && k < pt->plan.n; k++) {
		struct gb_patch *p = &pt->plan.v[k];
		if (p->why != GB_PATCH_OK) {
			/* (a uprobe on a VEX/EVEX instruction runs another one:
			 * decode.h gb_insn_vex_family) */
			const struct gb_insn *at = patch_insn_at(ins, nins, p->addr);
			if (at && gb_insn_vex_family(at)) {
				snprintf(buf, len, "the entry at 0x%llx would keep a uprobe (%s) on a "
					 "VEX/EVEX instruction, which uprobes do not run (docs/bpf.md "
					 "\"What a uprobe runs\")", (unsigned long long)p->addr,
					 gb_patch_why_str(p->why));
				why = buf;
				break;
			}
			gb_info("patch trap: the entry at 0x%llx keeps a uprobe (%s%s%s)",
				(unsigned long long)p->addr, gb_patch_why_str(p->why),
				p->why_other ? "; a short jump: " : "",
				p->why_other ? gb_patch_why_str(p->why_other) : "");
			ev[nref++] = p->addr; /* (ascending, as the plan) */
			continue;
		}
		if (p->len == GB_PATCH_SHORT_LEN)
			gb_info("patch trap: the entry at 0x%llx gets a 2-byte jump to a trampoline at "
				"0x%llx, in the nops before it (%s)", (unsigned long long)p->addr,
				(unsigned long long)p->tramp, gb_patch_why_str(p->why_other));
		int r = gb_jit__translate_from(pt->j, p->addr, patch_fetch, pt);
		uint64_t blk = r ? 0 : patch_entry_of(pt, p->addr);
		if (!blk || gb_patch_set_target(p, blk)) {
			snprintf(buf, len, "the entry at 0x%llx cannot be patched (%s)",
				 (unsigned long long)p->addr,
				 r == -ENOSPC || !r ? "the code cache is full" /* !r: no room for its entry block */
				 : "it does not translate");
			why = buf;
		}
		pt->npatched++;
	}
	if (!why && patch_guard_inside(pt, nins > PATCH_EVERY))
		why = "the code cache is full";
	if (!why && !pt->npatched)
		why = "no entry can be patched";
	/* the counting twins (docs/trace.md "Counting after the budget"),
	 * after every block: a range that fills the cache keeps recording */
	if (!why && pt->twins && gb_jit__twins(pt->j, patch_fetch, pt))
		gb_info("patch trap: no room for every counting twin: the rest of its blocks record "
			"after the budget too");
	if (!why && nref && patch_probe_attach(pt, path, lo, hi, bias, ev, nref))
		why = "its other entries cannot keep a uprobe";
out:
	free(pm);
	free(ev);
	free(cp);
	gb_entries_free(&en);
	return why;
}

const char *patch_build(struct patch_trap *pt, struct gb_tracee *t, const char *path, uint64_t lo,
			uint64_t hi, uint64_t bias, char *buf, size_t len)
{
	const char *why = refuse(t, buf, len);
	struct gb_insn *ins = NULL;
	size_t nins = 0, i0 = 0;
	if (why)
		return why;
	while (t->threads[i0].exited)
		i0++;
	pt->pid = t->pid;
	pt->start = lo + bias;
	pt->end = hi + bias;
	pt->npatched = 0;
	size_t n = (size_t)(pt->end - pt->start + 1);
	pt->code = calloc(1, n + GB_INSN_MAX_LEN);
	if (!pt->code || gb_mem_read(t->pid, pt->start, pt->code, n) != (ssize_t)n) {
		why = "its bytes cannot be read";
		goto fail;
	}
	/* the bytes just past the end: its last instruction may end there
	 * (what cannot be read stays 0) */
	gb_mem_read(t->pid, pt->end + 1, pt->code + n, GB_INSN_MAX_LEN - 1);
	if ((why = sweep(pt, &ins, &nins, buf, len)))
		goto fail;
	if (gb_jitmap_map_safe(t->pid, t->threads[i0].tid, pt->start, pt->end, "using the probe trap",
			  &pt->map, &t->threads[i0].pending_sig)) {
		why = ""; /* (said) */
		goto fail;
	}
	struct gb_jit_mem m = { pt->map.view, pt->map.view + GB_JIT_CODE_SIZE, pt->map.addr,
				pt->map.addr + GB_JIT_CODE_SIZE };
	/* (the owner check: user/jit/owner.c; rdfsbase needs FSGSBASE, else
	 * the TCB's self-pointer at fs:0 names the thread) */
	bool fsgsbase = getauxval(AT_HWCAP2) & HWCAP2_FSGSBASE;
	/* counting twins (docs/trace.md "Counting after the budget"): for a
	 * trace with a budget; GEBPF_PATCH_NOCOUNT=1: none (bench_budget.py's
	 * row of what recording every instruction costs) */
	const char *nc = getenv("GEBPF_PATCH_NOCOUNT");
	pt->twins = gb_jsonl__max_events(pt->range->out) && !(nc && *nc == '1');
	struct gb_jit_opts o = { .nostop = true, .ring_timeout_ms = 1000, .owner_check = true,
				 .owner_tcb = !fsgsbase, .read = read_target, .read_ctx = pt,
				 .twins = pt->twins };
	pt->j = gb_jit__new_opts(&m, pt->start, pt->end, &o);
	int lv = pt->j ? gb_jit__live_start(pt->j) : 0;
	if (!pt->j)
		why = "no translator";
	else if (lv) /* (before any patch: jit/live.c) */
		why = "the code cache's liveness word cannot be held";
	else {
		gb_jit__mark(pt->j, path); /* (a later gebpf recognises it: trap/patch/leftover.h) */
		why = plan(pt, path, lo, hi, bias, ins, nins, buf, len);
	}
	if (!why) {
		struct gb_jit_stats js;
		gb_jit__stats(pt->j, &js);
		gb_info("patch trap: the owner check in %llu of %llu entry blocks%s",
			(unsigned long long)js.owner_checks, (unsigned long long)js.entries,
			fsgsbase ? "" : " (by the TCB at fs:0: no FSGSBASE)");
	}
	if (why) {
		gb_jitmap_unmap_safe(t->pid, t->threads[i0].tid, pt->map.addr, &t->threads[i0].pending_sig);
		goto fail;
	}
	free(ins);
	gb_jit__ring_reset(pt->j);
	/* The engine's loop (this thread) sleeps in sigtimedwait for SIGCHLD up
	 * to poll_ms: the cache's wakes (the ring half full) end that sleep. */
	if (gb_jit__ring_waker(pt->j, (pid_t)syscall(SYS_gettid), SIGCHLD))
		gb_info("trace: the patch trap: no waker thread: the ring is drained every %u ms only",
			PATCH_POLL_MS);
	pt->images++;
	return NULL;
fail:
	free(ins);
	patch_unbuild(pt);
	return why;
}

void patch_unbuild(struct patch_trap *pt)
{
	gb_probes__free(pt->probes); /* (an earlier image's uprobes: exec) */
	pt->probes = NULL;
	pt->nprobed = 0;
	gb_patch_plan_free(&pt->plan);
	if (pt->j) {
		struct gb_jit_stats js;
		gb_jit__stats(pt->j, &js);
		pt->blocks += js.blocks;
		pt->tinsns += js.insns;
	}
	gb_jit__free(pt->j);
	pt->j = NULL;
	gb_jitmap_drop(&pt->map);
	patch_insns_free(pt);
	free(pt->code);
	pt->code = NULL;
	pt->written = false;
	pt->counting = false; /* (a new image's cache: on again at the next idle) */
	pt->npatched = 0;
	pt->nareas = pt->nfreed = 0;
	pt->cur_i = -1;
	memset(&pt->cur, 0, sizeof(pt->cur));
	for (unsigned k = 0; k < GB_JIT_TLS_COUNT; k++)
		pt->area_of[k] = -1;
}

/* Thread i gets area k: gs base, fs base registered. */
int patch_give_area(struct patch_trap *pt, struct gb_engine *e, size_t i, unsigned k,
		    struct user_regs_struct *r)
{
	pth(e, i)->known = true;
	pth(e, i)->k = k;
	pt->area_of[k] = (ssize_t)i;
	gb_jit__area_fs(pt->j, k, r->fs_base);
	pth(e, i)->fs_watch = !r->fs_base;
	r->gs_base = gb_jit__tls(pt->j, k);
	if (gb_regs_set(eng_tid(e, i), r))
		return -1;
	patch_probe_known(pt, eng_tid(e, i)); /* (its uprobe hits may go into the cache) */
	return 0;
}

/* Every thread stopped: gs bases set, threads in the range (or inside a
 * patch's bytes) moved into the cache, the patches written. */
void patch_start(struct gb_trap *t, struct gb_engine *e)
{
	struct patch_trap *pt = PT(t);
	if (!pt->j)
		return; /* (the range's module not mapped yet: trap/patch/exec.c) */
	for (size_t i = 0; i < e->t->nthreads; i++) {
		struct user_regs_struct r;
		pid_t tid = eng_tid(e, i);
		if (eng_state(e, i) != T_STOPPED || gb_regs_get(tid, &r))
			continue;
		uint64_t at = r.rip;
		if (gb_patch_inside(&pt->plan, r.rip, &at) || patch_in_range(pt, r.rip)) {
			/* A thread stopped inside the range goes on in a block
			 * of its own pc, which may end (at its 16th
			 * instruction) where no block begins: the blocks after
			 * it are translated now, every thread stopped, or its
			 * first run would leave the cache there, an in-range
			 * miss (xz -T2 on liblzma: a thread stopped at a load of
			 * the match finder, 9 attaches in 96 at load 4). */
			uint64_t from = gb_regs_restarting_syscall(&r) ? r.rip - 2 : at;
			if (patch_in_range(pt, from))
				(void)gb_jit__translate_from(pt->j, from, patch_fetch, pt);
			if (gb_regs_restarting_syscall(&r) && patch_in_range(pt, r.rip - 2) &&
			    (at = patch_entry_of(pt, r.rip - 2))) {
				/* Parked in a system call of the range: it makes it
				 * again from the cache (restarted as the kernel
				 * would: the call, or restart_syscall). */
				r.rax = r.rax == (unsigned long long)-516 ? SYS_restart_syscall
									  : r.orig_rax;
				r.orig_rax = (unsigned long long)-1;
				r.rip = at;
			} else if (!gb_regs_restarting_syscall(&r) && (at = patch_entry_of(pt, at))) {
				r.rip = at;
			}
		}
		int k = patch_area_new(pt); /* (at most 256 threads: patch_build) */
		if (k < 0 || patch_give_area(pt, e, i, (unsigned)k, &r))
			eng_set_state(e, i, T_DYING);
	}
	patch_write(pt, pt->pid, false);
	gb_jit__ways(pt->j); /* (jit/live.c: the patches are in place) */
	pt->written = true;
	patch_probe_redirect(pt, true);
	gb_info("patch trap: %u entries patched, %u probed, threads run natively", pt->npatched,
		pt->nprobed);
}
