/* The patch trap's entries that keep a uprobe (docs/trace.md "The patch
 * trap", "Entries that keep a uprobe"): where the planner refuses a patch
 * (another entry inside its 5 bytes, the range ending inside them...), the
 * probe trap's machinery (trap/probes/probes.h: one uprobe_multi link, or one
 * perf uprobe per entry on older kernels; bpf/probetrap.bpf.c) watches that
 * entry alone, inside the patch trap.
 *
 * A hit stops the thread after the probed instruction (the kernel ran it
 * out of line; pushf's TF hidden by trap/probes/probes.c).  gebpf takes the cache's
 * lock for it (gb_jit__lock_try_for; still held: the thread stays stopped
 * and it is tried again after the next idle), drains the ring, writes the entry
 * instruction's lines from the registers the BPF program recorded, and
 * hands the lock to the thread at the translated block of its next pc
 * (gb_jit__enter_held: its stretch marker first, so the rest of the
 * stretch follows the entry line with nobody in between).  A next pc out
 * of the range is a one-instruction stretch: the lock released, the thread
 * resumed natively.  A program signal caught with the hit pending (queued
 * before the probe's, or a fault of the probed instruction) is delivered
 * at the original pc after the lines, and the thread then runs with
 * PTRACE_SYSCALL until its rt_sigreturn, as for a signal taken out of the
 * cache (trap/patch/trap.c).
 *
 * Where the kernel lets a uprobe program write ip (Linux 6.18; probe/
 * probetrap.h contract 7) none of that happens for the threads with an
 * area: the BPF program sends the thread from the probe straight to the
 * entry's entry block (gb_jit__entry), as a patch's jump would, and the
 * kernel skips the instruction: no signal, no stop, no out-of-line run.
 * The entry block takes the lock and records the instruction itself.
 * Redirects are on from patch_start to the teardown (every thread stopped
 * at both), for threads from their area (patch_give_area) to their exit. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/user.h>

#include "common/log.h"
#include "ptrace/regs.h"
#include "ptrace/tracee.h"
#include "trace/engine_int.h"
#include "trap/patch/patch.h"
#include "trap/probes/probes.h"

static struct patch_probe_thread *ppt(struct gb_engine *e, size_t i)
{
	return &((struct patch_thread *)eng_trap_priv(e, i))->pp;
}

int patch_probe_attach(struct patch_trap *pt, const char *path, uint64_t lo, uint64_t hi,
		       uint64_t bias, const uint64_t *refused, size_t n)
{
	uint64_t *only = malloc((n ? n : 1) * sizeof(*only));
	if (!only) {
		gb_warn("range 0x%llx-0x%llx: the patch trap's probes: %s",
			(unsigned long long)pt->start, (unsigned long long)pt->end, strerror(ENOMEM));
		return -1;
	}
	for (size_t k = 0; k < n; k++)
		only[k] = refused[k] - bias;
	struct gb_probes_opts o = { .tgid = pt->pid, .path = path, .lo = lo, .hi = hi,
				    .mapped = true, .bias = bias, .only = only, .nonly = n,
				    .redirect = true };
	pt->probes = gb_probes__new(&o); /* (says why not) */
	free(only);
	if (!pt->probes)
		return -1;
	pt->nprobed = (unsigned)n;
	struct gb_probetrap *p = gb_probes__trap(pt->probes);
	if (!gb_probetrap__redirects(p)) {
		gb_info("patch trap: its uprobes stop the thread after the kernel ran the entry's "
			"instruction out of line (%s)", getenv("GEBPF_PROBETRAP_NOREDIRECT") ?
			"GEBPF_PROBETRAP_NOREDIRECT" :
			"the verifier refuses a uprobe program's write of ip");
		return 0;
	}
	unsigned sent = 0;
	for (size_t k = 0; k < n; k++) {
		uint64_t blk = gb_jit__translate_from(pt->j, refused[k], patch_fetch, pt) ? 0 :
			       patch_entry_of(pt, refused[k]);
		if (blk && gb_probetrap__redirect_add(p, refused[k], blk) == 0)
			sent++;
		else
			gb_info("patch trap: the uprobe at 0x%llx stops the thread (no entry block)",
				(unsigned long long)refused[k]);
	}
	gb_info("patch trap: %u of its %u uprobes send the thread straight into the code cache "
		"(the BPF program writes ip: no stop)", sent, pt->nprobed);
	return 0;
}

/* Thread tid has an area of the cache now: its hits may be redirected. */
void patch_probe_known(struct patch_trap *pt, pid_t tid)
{
	gb_probetrap__redirect_thread(gb_probes__trap(pt->probes), tid, true);
}

/* The patches and the cache are in place (on) or about to go (off). */
void patch_probe_redirect(struct patch_trap *pt, bool on)
{
	gb_probetrap__redirect_enable(gb_probes__trap(pt->probes), on);
}

/* The hit (or a program signal with a hit taken early): thread i waits for
 * the lock, stopped (the engine's want_entry; patch_probe_enter). */
static void took_hit(struct gb_engine *e, size_t i, const struct gb_probe_hit *hit)
{
	ppt(e, i)->hit = *hit;
	ppt(e, i)->has_hit = true;
	eng_th(e, i)->want_entry = true;
}

bool patch_probe_classify(struct patch_trap *pt, struct gb_engine *e, size_t i,
			  const struct gb_stop *st, enum gb_trap_verdict *v)
{
	struct gb_probe_hit hit;
	struct user_regs_struct r;
	if (!pt->probes || st->kind != GB_STOP_SIGNAL)
		return false;
	if (gb_probes__claim(pt->probes, st, &hit)) {
		/* Never delivered.  (TAKEN: its hit was taken at an earlier
		 * stop; after the end: its instruction ran after it; after an
		 * exec: the new image, untraced, maps the same file.) */
		if (!(hit.flags & (GB_PROBE_HIT_TAKEN | GB_PROBE_HIT_LOST)) && !e->ended &&
		    pt->written && patch_in_range(pt, hit.addr))
			took_hit(e, i, &hit);
		if (hit.flags & GB_PROBE_HIT_LOST)
			eng_finish(e, GB_END_ERROR); /* (said) */
		*v = GB_TRAP_SWALLOW;
		return true;
	}
	/* The program's own signal, dequeued before a probe's (lower numbers
	 * first, or a fault of the probed instruction): the hit is taken now,
	 * so that the handler runs after its instruction is in the trace. */
	if (ppt(e, i)->has_hit || e->ended || !gb_probes__take_early(pt->probes, st, &hit))
		return false;
	if (!pt->written)
		return false; /* (after an exec: untraced) */
	took_hit(e, i, &hit);
	if (eng_sync_fault(st) && gb_regs_get(st->tid, &r) == 0) {
		ppt(e, i)->fault_seen = true;
		ppt(e, i)->fault_pc = r.rip;
		ppt(e, i)->fault = *st;
	}
	*v = GB_TRAP_PROGRAM; /* (kept for the thread: delivered when it goes on) */
	return true;
}

/* The lines of the hit's instruction (the lock held: between stretches).
 * 1 written, 0 not (the trace ended), -1 the thread died. */
static int emit_hit(struct patch_trap *pt, struct gb_engine *e, size_t i,
		    const struct user_regs_struct *now, bool *faulted)
{
	struct patch_probe_thread *t = ppt(e, i);
	struct gb_access acc[GB_MAX_ACCESSES];
	uint64_t pc = t->hit.addr;
	const struct gb_insn *in = patch_fetch(pt, pc); /* (the original bytes) */
	*faulted = t->fault_seen && t->fault_pc == pc && now->rip == pc;
	t->fault_seen = false;
	if (!in) {
		gb_err("trace: thread %d: the entry at 0x%llx cannot be decoded", eng_tid(e, i),
		       (unsigned long long)pc);
		eng_finish(e, GB_END_ERROR);
		return 0;
	}
	int n = gb_probe_hit__accesses(&t->hit, now, in, acc, GB_MAX_ACCESSES);
	if (n < 0) {
		gb_err("trace: entry at 0x%llx: cannot compute its memory accesses: %s",
		       (unsigned long long)pc, strerror(-n));
		eng_finish(e, GB_END_ERROR);
		return 0;
	}
	if (eng_max_insns_done(e)) {
		eng_finish(e, GB_END_MAX_INSNS);
		return 0;
	}
	/* A probed instruction that faulted (its signal came first): its exec
	 * line and the lines of the accesses it completed, as when stepped. */
	if (*faulted) {
		int done = eng_fault_done(pc, in->len, acc, n, &t->fault, pc);
		if (done >= 0)
			n = done;
	}
	eng_commit(e, i, pc, acc, n);
	return 1;
}

/* The cache's lock for gebpf, within about PATCH_LOCK_US, draining the
 * ring meanwhile (a stretch may be waiting for the ring's room). */
static bool take_lock(struct patch_trap *pt, struct gb_engine *e)
{
	for (unsigned k = 0; k < 10; k++) {
		if (gb_jit__lock_try_for(pt->j, PATCH_LOCK_US / 10))
			return true;
		patch_drain(pt, e, false);
	}
	return false;
}

/* Thread i goes on now (the lock may be its own): the stopped threads
 * that do not wait at an entry are resumed. */
static int go_on(struct gb_engine *e)
{
	eng_run_natives(e);
	return 1;
}

int patch_probe_enter(struct gb_trap *t, struct gb_engine *e, size_t i)
{
	struct patch_trap *pt = (struct patch_trap *)t;
	struct patch_thread *th = eng_trap_priv(e, i);
	struct user_regs_struct now;
	pid_t tid = eng_tid(e, i);
	bool faulted;
	if (!th->pp.has_hit || e->ended || !pt->j || !pt->written) {
		th->pp.has_hit = false;
		return go_on(e); /* (never owns the range: it runs on) */
	}
	if (!take_lock(pt, e)) {
		eng_th(e, i)->want_entry = true; /* a stretch is on: after the next idle */
		pt->probe_waits++;
		return 1;
	}
	patch_drain(pt, e, true); /* everything before it (the lock is gebpf's) */
	th->pp.has_hit = false;
	if (gb_regs_get(tid, &now)) {
		gb_jit__lock_release(pt->j);
		eng_set_state(e, i, T_DYING); /* killed meanwhile: its exit comes */
		return 1;
	}
	if (emit_hit(pt, e, i, &now, &faulted) != 1) {
		gb_jit__lock_release(pt->j);
		return 1;
	}
	pt->probe_hits++;
	int sig = e->t->threads[i].pending_sig;
	bool handler = sig && patch_caught(pt->pid, sig);
	uint64_t blk = 0;
	if (patch_in_range(pt, now.rip) && !faulted && !handler)
		blk = gb_jit__enter_held(pt->j, th->k, now.rip, patch_fetch, pt);
	if (blk) {
		now.rip = blk; /* the lock is the thread's now */
		if (gb_regs_set(tid, &now)) {
			gb_jit__lock_release(pt->j);
			eng_set_state(e, i, T_DYING);
			return 1;
		}
		return go_on(e); /* (the others wait for its stretch) */
	}
	gb_jit__lock_release(pt->j);
	pt->marks++; /* (a stretch of its own: no marker) */
	if (!patch_in_range(pt, now.rip))
		return go_on(e); /* a one-instruction stretch: natively on */
	if (handler || faulted) {
		/* Its signal at the original pc; the handler's return into the
		 * range goes back into the cache (trap/patch/trap.c). */
		th->sigret += handler;
		return go_on(e);
	}
	gb_err("trace: thread %d: no translation for 0x%llx after the entry at 0x%llx", tid,
	       (unsigned long long)now.rip, (unsigned long long)th->pp.hit.addr);
	eng_finish(e, GB_END_ERROR);
	return 1;
}

void patch_probe_teardown(struct patch_trap *pt, struct gb_engine *e)
{
	if (!pt->probes)
		return;
	patch_probe_redirect(pt, false); /* (every thread stopped: none is in the program) */
	for (size_t i = 0; i < e->t->nthreads; i++) {
		eng_th(e, i)->want_entry = false;
		ppt(e, i)->has_hit = false;
	}
	struct gb_probetrap_stats s;
	/* Hits do nothing from now on: the uprobes can go after the detach
	 * (their removal waits for the kernel's grace periods, tens of ms the
	 * program would spend stopped; patch_free_later). */
	gb_probetrap__disarm(gb_probes__trap(pt->probes));
	gb_probetrap__stats(gb_probes__trap(pt->probes), &s);
	gb_info("trace: the patch trap: %llu entries through its %u uprobes (%llu waited for the "
		"cache's lock), %llu sent straight into the cache", (unsigned long long)pt->probe_hits,
		pt->nprobed, (unsigned long long)pt->probe_waits, (unsigned long long)s.redirects);
}
