/* The patch trap (--trap patch, docs/trace.md "The patch trap"): entries
 * without a stop.  The range is translated up front into the stop-free
 * code cache (user/jit, gb_jit__new_opts nostop) mapped near it, and each
 * entry of the range is overwritten with a 5-byte jmp to its entry block
 * (jit/patch.h's plan).  Threads run natively under PTRACE_CONT; in the
 * cache they take its lock, write their records to its ring and leave by
 * jumps; gebpf drains the ring while the program runs (the idle hook, every
 * poll_ms) and makes the same lines as the other traps (eng_commit), each
 * stretch its thread's (the ring's markers name its area).  No thread ever
 * owns the range in the engine's sense and nothing is stepped: a thread
 * stopped in the cache is put at its original boundary by gb_jit__unwind.
 *
 * What it needs (else NULL with one line: the session uses the probe
 * trap): threads with gs base 0 (at most 256), every instruction of the range
 * translatable, an entry patchable (the others keep a uprobe:
 * trap/patch/probe.c), the cache's mmap allowed.
 *
 * A signal with a handler stopping a thread in the cache: the thread is put
 * at its original instruction (the lock released) and takes it there, so
 * the handler and its ucontext see original addresses; it then runs with
 * PTRACE_SYSCALL until its rt_sigreturn, after which a pc in the range goes
 * back into the cache (the entry block of that pc).  A fork child is moved
 * out of the cache, gets the original bytes back, gs base 0 and no cache;
 * a clone's child gets its own area, a copy of its parent's.
 * The end (every thread stopped): records drained, threads in the cache put
 * back, bytes restored, gs bases 0, the cache unmapped. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>

#include "common/guard.h"
#include "common/log.h"
#include "decode/plan.h"
#include "jit/jit.h"
#include "jit/patch.h"
#include "ptrace/mem.h"
#include "ptrace/procfs.h"
#include "ptrace/regs.h"
#include "ptrace/tracee.h"
#include "trace/cpu.h"
#include "trace/engine_int.h"
#include "trace/jitmap.h"
#include "trap/probes/probes.h"
#include "trap/patch/patch.h"


#define PT(t) ((struct patch_trap *)(t))

static struct patch_thread *pth(struct gb_engine *e, size_t i) { return eng_trap_priv(e, i); }

const struct gb_insn *patch_fetch(void *ctx, uint64_t pc)
{
	static struct gb_insn ring[64];
	static unsigned k;
	struct patch_trap *pt = ctx;
	struct gb_insn *out = &ring[k++ % 64];
	uint8_t b[GB_INSN_MAX_LEN];
	const uint8_t *at = b;
	if (pc >= pt->start && pc <= pt->end)
		at = pt->code + (pc - pt->start); /* the original bytes, patched or not */
	else if (gb_mem_read(pt->pid, pc, b, sizeof(b)) <= 0)
		return NULL;
	return gb_decode(pc, at, GB_INSN_MAX_LEN, out) ? NULL : out;
}

static bool in_range(const struct patch_trap *pt, uint64_t pc) { return patch_in_range(pt, pc); }

/* pt->held becomes a line (fault: its instruction raised that signal, its
 * completed accesses only), up to --max-insns. */
static void commit_held(struct patch_trap *pt, struct gb_engine *e, const struct gb_stop *fault)
{
	struct gb_jit_rec *h = &pt->held;
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
	eng_commit(e, (size_t)pt->held_i, h->pc, h->acc, n);
	pt->records++;
}

/* The ring's records become lines (each stretch its thread's), the last
 * one held back unless settled (trap/patch/patch.h): the writer puts an
 * instruction's record in the ring before running it, so while a thread may
 * be in a stretch the last record can still fault (its faulting access
 * must not be a line) or be taken back.  fault: the last record's
 * instruction raised this signal, its thread is stopped at it. */
static void drain_fault(struct patch_trap *pt, struct gb_engine *e, const struct gb_stop *fault,
			bool settled)
{
	struct gb_jit_rec rec;
	int r;
	size_t n = 0;
	if (!pt->j)
		return;
	gb_jsonl__batch(e->out, true);
	while ((r = gb_jit__ring_poll(pt->j, &pt->cur, &rec)) == 1) {
		if (rec.kind == GB_JIT_REC_MARK) {
			pt->marks++; /* an acquisition of the lock: an entry */
			pt->cur_i = rec.area < GB_JIT_TLS_COUNT ? pt->area_of[rec.area] : -1;
			continue;
		}
		if (pt->cur_i == AREA_UNTRACED)
			continue; /* a vfork child's, untraced as under every trap */
		if (pt->cur_i < 0) {
			gb_err("trace: the code cache's ring holds a stretch of no known thread");
			eng_finish(e, GB_END_ERROR);
			break;
		}
		struct patch_thread *th = pth(e, (size_t)pt->cur_i);
		if (th->skip && th->skip_pc == rec.pc) {
			th->skip = false; /* (recorded before a restart) */
			continue;
		}
		commit_held(pt, e, NULL);
		if (e->ended && eng_max_insns_done(e))
			break;
		pt->held = rec;
		pt->held_i = pt->cur_i;
		pt->has_held = true;
		if (++n % 4096 == 0)
			gb_jit__ring_commit(pt->j, &pt->cur);
	}
	if (fault || settled)
		commit_held(pt, e, fault);
	gb_jit__ring_commit(pt->j, &pt->cur);
	gb_jsonl__batch(e->out, false);
	if (r < 0) {
		gb_err("trace: the code cache's ring holds a record gebpf did not write");
		eng_finish(e, GB_END_ERROR);
	}
}

void patch_drain(struct patch_trap *pt, struct gb_engine *e, bool settled)
{
	drain_fault(pt, e, NULL, settled);
}

static void drain(struct patch_trap *pt, struct gb_engine *e) { patch_drain(pt, e, false); }

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
	for (size_t k = 0; !held && k < m.n; k++)
		if (in_range(pt, m.pc[k]) && gb_jit__translate_from(pt->j, m.pc[k], patch_fetch, pt))
			gb_warn("trace: the patch trap: 0x%llx (missed) does not translate",
				(unsigned long long)m.pc[k]);
	if (!held && m.n) {
		patch_guard_inside(pt, false); /* none of them evicted by those */
		gb_jit__ways(pt->j);
	}
	if (!held)
		gb_jit__lock_release(pt->j);
}

static void patch_idle(struct gb_trap *t, struct gb_engine *e)
{
	drain(PT(t), e);
	patch_collect_misses(PT(t), false);
	patch_count_idle(PT(t), e); /* (trap/patch/count.c) */
	patch_later_resend(PT(t), e);
}

/* Thread i (stopped, registers r) in the cache is put at its original
 * instruction boundary (gb_jit__unwind: its own registers, the lock
 * released if it held it, records of what it did not run taken back).
 * fault: it stopped at an instruction's copy for a fault that instruction
 * raised (put at it, its saved registers reloaded, its record kept).
 * 0, -ESRCH (it died), -EAGAIN (not in the cache's code). */
static int unwind(struct patch_trap *pt, struct gb_engine *e, size_t i,
		  struct user_regs_struct *r, const struct gb_stop *fault)
{
	struct gb_jit_loc loc;
	struct gb_jit_unwound u;
	pid_t tid = eng_tid(e, i);
	bool at = fault && gb_jit__locate(pt->j, r->rip, &loc) == 0 && loc.at_insn;
	if (at && loc.twin) { /* a counting twin's copy: its counts as it faulted */
		if (gb_jit__unwind(pt->j, r, &pt->cur, &u))
			return -EAGAIN;
		patch_count_fault(pt, e, i, r, fault, pth(e, i)->k);
		return gb_regs_set(tid, r) ? -ESRCH : 0;
	}
	if (at) {
		for (unsigned k = 0; k < GB_REG_COUNT; k++)
			if (loc.restore & (1u << k))
				*gb_regs_field(r, k) = gb_jit__saved(pt->j, k);
		r->rip = loc.pc;
		gb_jit__lock_release(pt->j); /* blocks run holding it */
		return gb_regs_set(tid, r) ? -ESRCH : 0;
	}
	if (gb_jit__unwind(pt->j, r, &pt->cur, &u))
		return -EAGAIN;
	if (u.late_recs && pt->has_held) {
		pt->has_held = false; /* the record it took back (the ring's last) */
		u.late_recs--;
	}
	pt->late += u.late_recs;
	if (u.recorded) {
		pth(e, i)->skip = true;
		pth(e, i)->skip_pc = u.pc;
	}
	return gb_regs_set(tid, r) ? -ESRCH : 0;
}

bool patch_caught(pid_t pid, int sig)
{
	uint64_t cgt = 0;
	return gb_proc_status_num(pid, "SigCgt", 16, &cgt) == 0 && sig >= 1 && sig <= 64 &&
	       (cgt >> (sig - 1) & 1);
}

uint64_t patch_entry_of(struct patch_trap *pt, uint64_t pc)
{
	return gb_jit__entry(pt->j, pc, patch_fetch, pt);
}

int patch_area_new(struct patch_trap *pt)
{
	if (pt->nfreed)
		return (int)pt->freed[--pt->nfreed];
	return pt->nareas < GB_JIT_TLS_COUNT ? (int)pt->nareas++ : -1;
}

/* Thread i gets area k: gs base, fs base registered. */
static int give_area(struct patch_trap *pt, struct gb_engine *e, size_t i, unsigned k,
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

/* A thread that appeared (a clone's child, stopped): its own area, a copy
 * of its parent's (whose gs base it inherited: it may return into the
 * cache from an in-range clone). */
static void settle_new(struct patch_trap *pt, struct gb_engine *e, size_t i)
{
	struct user_regs_struct r;
	if (pth(e, i)->known || !pt->written)
		return;
	pth(e, i)->known = true;
	if (gb_regs_get(eng_tid(e, i), &r))
		return;
	uint64_t a0 = gb_jit__tls(pt->j, 0);
	unsigned parent = (unsigned)((r.gs_base - a0) / GB_JIT_TLS_SIZE);
	int nk = patch_area_new(pt);
	if (nk < 0) {
		gb_err("trace: thread %d: more than %u threads at once for the patch trap",
		       eng_tid(e, i), GB_JIT_TLS_COUNT);
		eng_finish(e, GB_END_ERROR);
		return;
	}
	unsigned k = (unsigned)nk;
	if (r.gs_base >= a0 && parent < GB_JIT_TLS_COUNT && r.gs_base == gb_jit__tls(pt->j, parent))
		gb_jit__area_clone(pt->j, k, parent);
	if (give_area(pt, e, i, k, &r))
		eng_set_state(e, i, T_DYING);
}

static enum gb_trap_verdict patch_classify(struct gb_trap *t, struct gb_engine *e, size_t i,
					   const struct gb_stop *st, enum gb_trap_where where,
					   uint64_t pc)
{
	struct patch_trap *pt = PT(t);
	struct user_regs_struct r;
	pid_t tid = eng_tid(e, i);
	enum gb_trap_verdict v;
	settle_new(pt, e, i);
	if (patch_probe_classify(pt, e, i, st, &v))
		return v;
	patch_later_arrived(e, i, st);
	if (st->kind != GB_STOP_SIGNAL || !pt->j || !pt->written || gb_regs_get(tid, &r))
		return GB_TRAP_PROGRAM;
	if (!gb_jit__in_code(pt->j, r.rip)) {
		/* Delivered natively inside a handler being watched: its own
		 * rt_sigreturn comes first and must not end the watch. */
		if (pth(e, i)->sigret && patch_caught(pt->pid, st->sig))
			pth(e, i)->sigret++;
		return GB_TRAP_PROGRAM;
	}
	if (st->sig == SIGSEGV && st->code > 0 && gb_jit__owner_fault(pt->j, &r)) /* jit/owner.c */
		return gb_regs_set(tid, &r) ? GB_TRAP_PROGRAM : GB_TRAP_SWALLOW;
	/* In the cache: a handler must see the original instruction. */
	if (!patch_caught(pt->pid, st->sig))
		return GB_TRAP_PROGRAM; /* ignored, or the default action: nothing sees it */
	struct gb_jit_loc loc;
	/* (int3's SIGTRAP is the instruction's own, like a fault: never put off) */
	bool own = eng_sync_fault(st) || (st->sig == SIGTRAP && st->code > 0);
	bool sync = own && gb_jit__locate(pt->j, r.rip, &loc) == 0 && loc.at_insn;
	if (!own && patch_later(pt, e, i, st, &r)) /* (not inside a patch's bytes) */
		return GB_TRAP_SWALLOW;
	return patch_take(pt, e, i, &r, st->sig, sync ? st : NULL);
}

enum gb_trap_verdict patch_take(struct patch_trap *pt, struct gb_engine *e, size_t i,
				struct user_regs_struct *r, int sig, const struct gb_stop *fault)
{
	pid_t tid = eng_tid(e, i);
	bool late = patch_later_taken(e, i) && !fault; /* (put off too often) */
	uint64_t rip = r->rip;
	int u = unwind(pt, e, i, r, fault);
	if (u == -ESRCH) {
		eng_set_state(e, i, T_DYING);
		return GB_TRAP_SWALLOW;
	}
	drain_fault(pt, e, fault, false);
	if (u) {
		gb_warn("trace: thread %d: signal %d in the code cache at 0x%llx: delivered there",
			tid, sig, (unsigned long long)rip);
		if (pth(e, i)->sigret)
			pth(e, i)->sigret++;
		return GB_TRAP_PROGRAM;
	}
	if (fault) {
		siginfo_t si;
		if (ptrace(PTRACE_GETSIGINFO, tid, 0, &si) == 0 && (uint64_t)si.si_addr == rip) {
			si.si_addr = (void *)r->rip;
			ptrace(PTRACE_SETSIGINFO, tid, 0, &si);
		}
	}
	pth(e, i)->sigret++;
	pt->handled++;
	uint64_t pc = r->rip;
	if (late && patch_later_native(pt, e, i, r)) { /* (trap/patch/later.c) */
		gb_info("trace: thread %d: signal %d taken at 0x%llx, the native copy of 0x%llx inside "
			"a patch's bytes", tid, sig, (unsigned long long)r->rip, (unsigned long long)pc);
		return GB_TRAP_PROGRAM;
	}
	gb_info("trace: thread %d: signal %d taken at 0x%llx, out of the code cache", tid, sig,
		(unsigned long long)r->rip);
	return GB_TRAP_PROGRAM;
}

static bool patch_syscalls(struct gb_trap *t, struct gb_engine *e, size_t i)
{
	return pth(e, i)->sigret || pth(e, i)->fs_watch || PT(t)->waiting;
}

/* Records are read with the fs base they were written with. */
static void watch_fs(struct patch_trap *pt, struct gb_engine *e, size_t i,
		     const struct user_regs_struct *r)
{
	if (!pth(e, i)->fs_watch || !r->fs_base)
		return;
	drain(pt, e);
	gb_jit__area_fs(pt->j, pth(e, i)->k, r->fs_base);
	pth(e, i)->fs_watch = false;
}

/* After a watched handler's rt_sigreturn (its exit stop shows orig_rax -1,
 * the restored context's; any other system call's shows its number), a
 * thread back in the range goes back into the cache.  Handlers nest: one
 * that enters the range and is interrupted there (or anywhere) by another
 * returns to the outer handler, whose own rt_sigreturn must still be seen
 * (a system call the handler makes in the cache, or the inner return, is no
 * end of the watch: returning natively into the range would run original
 * code unrecorded, or the tail of a patch's jump). */
static void patch_syscall_exit(struct gb_trap *t, struct gb_engine *e, size_t i)
{
	struct patch_trap *pt = PT(t);
	struct user_regs_struct r;
	pid_t tid = eng_tid(e, i);
	patch_pending_exit(pt, e, i);
	if (gb_regs_get(tid, &r))
		return;
	watch_fs(pt, e, i, &r);
	if (!pth(e, i)->sigret || !pt->j || !pt->written || r.orig_rax != (unsigned long long)-1)
		return;
	pth(e, i)->sigret--;
	if (!in_range(pt, r.rip))
		return;
	uint64_t blk = patch_entry_of(pt, r.rip);
	if (!blk) {
		gb_err("trace: thread %d: no translation for 0x%llx after its signal handler", tid,
		       (unsigned long long)r.rip);
		eng_finish(e, GB_END_ERROR);
		return;
	}
	r.rip = blk;
	gb_regs_set(tid, &r);
}

static void patch_resuming(struct gb_trap *t, struct gb_engine *e, size_t i, int sig)
{
	settle_new(PT(t), e, i);
}

/* Every thread stopped: gs bases set, threads in the range (or inside a
 * patch's bytes) moved into the cache, the patches written. */
static void patch_start(struct gb_trap *t, struct gb_engine *e)
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
		if (gb_patch_inside(&pt->plan, r.rip, &at) || in_range(pt, r.rip)) {
			if (gb_regs_restarting_syscall(&r) && in_range(pt, r.rip - 2) &&
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
		if (k < 0 || give_area(pt, e, i, (unsigned)k, &r))
			eng_set_state(e, i, T_DYING);
	}
	patch_write(pt, pt->pid, false);
	gb_jit__ways(pt->j); /* (jit/live.c: the patches are in place) */
	pt->written = true;
	patch_probe_redirect(pt, true);
	gb_info("patch trap: %u entries patched, %u probed, threads run natively", pt->npatched,
		pt->nprobed);
}

void patch_flush(struct patch_trap *pt, struct gb_engine *e)
{
	patch_drain(pt, e, true); /* (an exec: no other thread) */
	patch_collect_misses(pt, true);
	patch_count_all(pt, e);
	gb_guard_undo_clear(); /* the old image's bytes went with it */
}

/* A thread that exited gives its area back once its records are drained
 * (a program making threads all the time reuses them: at most 256 at
 * once, not in all). */
static void patch_exit(struct gb_trap *t, struct gb_engine *e, size_t i)
{
	struct patch_trap *pt = PT(t);
	/* (its own last record ran: it is gone; another thread's may not) */
	patch_drain(pt, e, pt->has_held && pt->held_i == (ssize_t)i);
	if (pt->probes)
		gb_probes__forget(pt->probes, eng_tid(e, i));
	struct patch_thread *th = pth(e, i);
	if (th->known && th->k < GB_JIT_TLS_COUNT && pt->area_of[th->k] == (ssize_t)i) {
		if (pt->counting)
			patch_count_area(pt, e, th->k); /* (before another thread has it) */
		if (pt->cur_i == (ssize_t)i)
			pt->cur_i = -1; /* (the next record is a marker) */
		pt->area_of[th->k] = -1;
		pt->freed[pt->nfreed++] = th->k;
		th->known = false;
	}
}


/* The end, every thread held. */
static void patch_teardown(struct gb_trap *t, struct gb_engine *e)
{
	struct patch_trap *pt = PT(t);
	patch_later_end(e);
	patch_probe_teardown(pt, e);
	/* From here on the cache does not wait for gebpf, whatever happens to
	 * the worker during the end (jit/live.c) */
	if (pt->j)
		gb_jit__live_end(pt->j);
	if (!pt->written)
		return;
	drain(pt, e); /* (every thread stopped, but perhaps in a stretch) */
	gb_guard_test_point("end-begin");
	if (!eng_live(e)) {
		patch_drain(pt, e, true);
		patch_count_all(pt, e);
		pt->written = false;
		patch_report(pt);
		return;
	}
	/* In this order, so that a worker SIGKILLed at any point leaves a
	 * program that runs on correctly (docs/trace.md "Ending"): the bytes
	 * first (a thread left in the cache leaves it by its exits; none is
	 * ever at a pc inside a patch's bytes while they are written), then
	 * the threads out of the cache, then gs bases 0 (none enters it). */
	patch_write(pt, pt->pid, true);
	for (size_t i = 0; i < e->t->nthreads; i++) {
		struct user_regs_struct r;
		pid_t tid = eng_tid(e, i);
		if (eng_state(e, i) != T_STOPPED || gb_regs_get(tid, &r))
			continue;
		if (gb_jit__in_code(pt->j, r.rip) && unwind(pt, e, i, &r, NULL)) {
			gb_err("trace: thread %d: cannot leave the code cache at 0x%llx", tid,
			       (unsigned long long)r.rip);
			continue;
		}
	}
	gb_guard_test_point("end-unwound");
	/* What the end stepped through is the trace's too, up to --max-insns
	 * (no thread in the cache now). */
	patch_drain(pt, e, true);
	patch_count_all(pt, e); /* (the threads unwound out of twins: counts taken back) */
	ssize_t via = patch_gs_zero(e);
	gb_guard_test_point("end-gs0");
	e->t->zero_gs = true; /* (and a thread made since, at the detach) */
	pt->written = false;
	patch_report(pt);
	if (pt->late)
		gb_warn("trace: the patch trap: %llu records were read before they were taken back "
			"(a thread stopped in the cache): the trace is not exact there",
			(unsigned long long)pt->late);
	if (via < 0 || gb_jitmap_unmap_safe(pt->pid, eng_tid(e, (size_t)via), pt->map.addr,
					   &e->t->threads[via].pending_sig))
		gb_warn("pid %d: the code cache at 0x%llx stays mapped (never entered again)", pt->pid,
			(unsigned long long)pt->map.addr);
	gb_guard_test_point("end-unmapped");
}

static bool patch_must_restore(const struct gb_trap *t) { return PT(t)->written; }

static bool patch_native(const struct gb_trap *t) { return true; }

static bool patch_covers(const struct gb_trap *t, uint64_t pc) { return false; }

/* Entries: acquisitions of the cache's lock (an entry block, the
 * re-acquire after a system call of the range), one marker each. */
static uint64_t patch_entries(const struct gb_trap *t) { return PT(t)->marks; }

/* After teardown: the cache unmapped, the bytes back; only gebpf's view of
 * the cache (its munmap, the waker's join: tens of ms under load) and the
 * refused entries' uprobes, disarmed (patch_probe_teardown), are left;
 * not with an exec's probe trap (pt->instead). */
static bool patch_free_later(const struct gb_trap *t)
{
	return !PT(t)->instead && !PT(t)->written;
}

const struct gb_trap_ops patch_ops = {
	.name = "patch",
	.thread_size = sizeof(struct patch_thread),
	.leave_native = true,
	.stop_all = true,
	.poll_ms = 20, /* and at each wake of the cache (gb_jit__ring_waker) */
	.idle = patch_idle,
	.native = patch_native,
	.start = patch_start,
	.before_run = patch_before_run,
	.covers = patch_covers,
	.classify = patch_classify,
	.enter = patch_probe_enter,
	.syscalls = patch_syscalls,
	.resuming = patch_resuming,
	.child = patch_child,
	.exec = patch_exec,
	.syscall_exit = patch_syscall_exit,
	.exit = patch_exit,
	.must_restore = patch_must_restore,
	.teardown = patch_teardown,
	.entries = patch_entries,
	.free_later = patch_free_later,
	.free = patch_free,
};
