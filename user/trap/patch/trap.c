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
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>

#include "common/log.h"
#include "jit/jit.h"
#include "ptrace/regs.h"
#include "ptrace/tracee.h"
#include "trace/engine_int.h"
#include "trap/patch/patch.h"
#include "trap/probes/probes.h"

#define PT(t) ((struct patch_trap *)(t))

static struct patch_thread *pth(struct gb_engine *e, size_t i) { return eng_trap_priv(e, i); }

static bool in_range(const struct patch_trap *pt, uint64_t pc) { return patch_in_range(pt, pc); }

static void drain(struct patch_trap *pt, struct gb_engine *e) { patch_drain(pt, e, false); }

static void patch_idle(struct gb_trap *t, struct gb_engine *e)
{
	drain(PT(t), e);
	patch_collect_misses(PT(t), false);
	patch_count_idle(PT(t), e); /* (trap/patch/count.c) */
	patch_later_resend(PT(t), e);
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
	if (patch_give_area(pt, e, i, k, &r))
		eng_set_state(e, i, T_DYING);
}

static enum gb_trap_verdict take_signal(struct patch_trap *pt, struct gb_engine *e, size_t i,
					struct user_regs_struct *r, int sig, const struct gb_stop *fault)
{
	pid_t tid = eng_tid(e, i);
	bool late = patch_later_taken(e, i) && !fault; /* (put off too often) */
	uint64_t rip = r->rip;
	int u = patch_unwind(pt, e, i, r, fault);
	if (u == -ESRCH) {
		eng_set_state(e, i, T_DYING);
		return GB_TRAP_SWALLOW;
	}
	patch_drain_fault(pt, e, fault, false);
	if (u) {
		gb_warn("trace: thread %d: signal %d in the code cache at 0x%llx: delivered there",
			tid, sig, (unsigned long long)rip);
		pth(e, i)->cache_frame = true;
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
	return take_signal(pt, e, i, &r, st->sig, sync ? st : NULL);
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

/* A thread about to run on its own: a new one gets its area; one watched
 * (a handler's rt_sigreturn, an fs base not set yet, a range not mapped
 * yet) runs with PTRACE_SYSCALL. */
static bool patch_resume(struct gb_trap *t, struct gb_engine *e, size_t i, int sig)
{
	settle_new(PT(t), e, i);
	return pth(e, i)->sigret || pth(e, i)->fs_watch || PT(t)->waiting;
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

static const struct gb_trap_ops patch_ops = {
	.name = "patch",
	.thread_size = sizeof(struct patch_thread),
	.native = patch_native,
	.start = patch_start,
	.covers = patch_covers,
	.classify = patch_classify,
	.enter = patch_probe_enter,
	.leave_native = true,
	.before_run = patch_before_run,
	.resume = patch_resume,
	.syscall_exit = patch_syscall_exit,
	.poll_ms = PATCH_POLL_MS, /* and at each wake of the cache (gb_jit__ring_waker) */
	.idle = patch_idle,
	.child = patch_child,
	.exec = patch_exec,
	.exit = patch_exit,
	.stop_all = true,
	.must_restore = patch_must_restore,
	.teardown = patch_teardown,
	.entries = patch_entries,
	.free_later = patch_free_later,
	.free = patch_free,
};

struct gb_trap *gb_trap_patch_new(struct gb_tracee *t, struct gb_trace_range *rg, const char *path,
				  uint64_t lo, uint64_t hi, uint64_t bias)
{
	char buf[200];
	struct patch_trap *pt = calloc(1, sizeof(*pt));
	const char *why = pt ? NULL : strerror(ENOMEM);
	if (pt) {
		pt->base.ops = &patch_ops;
		pt->range = rg;
		patch_unbuild(pt);
		why = patch_build(pt, t, path, lo, hi, bias, buf, sizeof(buf));
	}
	if (!why)
		return &pt->base;
	if (*why)
		gb_warn("range 0x%llx-0x%llx: the patch trap does not apply (%s): using the probe trap",
			(unsigned long long)(lo + bias), (unsigned long long)(hi + bias), why);
	if (pt)
		patch_free(&pt->base);
	return NULL;
}

struct gb_trap *gb_trap_patch_pending(struct gb_tracee *t, struct gb_trace_range *r)
{
	struct patch_trap *pt = calloc(1, sizeof(*pt));
	if (!pt)
		return NULL;
	pt->base.ops = &patch_ops;
	pt->range = r;
	pt->pid = t->pid;
	pt->waiting = true;
	patch_unbuild(pt);
	return &pt->base;
}

void gb_trap_patch_asked(struct gb_trap *t, bool asked) { PT(t)->quiet = !asked; }
