/* The patch trap (docs/trace.md "The patch trap"): its state, and its files
 * in layers, bottom to top; each calls only the ones above it in this list,
 * never one below, and trap.c (the table) is the only file that names them
 * all:
 *
 *   core.c     the range's original instructions, the cache's entry blocks,
 *              its ring drained into lines, the guard under the patches,
 *              the threads' areas, the patches' bytes
 *   probe.c    its uprobes: the entries the planner refused
 *   count.c    counting after the budget; the statistics (-v)
 *   later.c    an asynchronous signal in a patch's copy, taken later
 *   unwind.c   a thread stopped in the cache put at its original boundary
 *   new.c      the set-up: cache, translations, plan, uprobes; the start
 *              (threads given areas, the patches written)
 *   end.c      the end: the bytes back, threads out of the cache, gs
 *              bases 0, the cache unmapped; gebpf's view freed
 *   child.c    fork and vfork children
 *   exec.c     an exec, and a range whose module is mapped later
 *   trap.c     the hooks of the running trap, its table, its makers
 *              (trap/traps.h)
 */
#ifndef GB_TRAP_PATCH_H
#define GB_TRAP_PATCH_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jit/jit.h"
#include "jit/patch.h"
#include "probe/probetrap.h"
#include "ptrace/wait.h"
#include "trace/jitmap.h"
#include "trace/trap.h"

#define AREA_UNTRACED ((ssize_t)-2)
/* How long gebpf tries for the cache's lock (a busy range frees it between
 * stretches every few microseconds; Python's bytecode loop is in the range
 * most of the time), in microseconds. */
#define PATCH_LOCK_US 2000

struct gb_engine;
struct gb_probes;

/* The per-thread state of the entries that keep a uprobe
 * (trap/patch/probe.c). */
struct patch_probe_thread {
	bool has_hit;                 /* stopped after a probed entry's instruction:
				       * its lines wait for the cache's lock */
	struct gb_probe_hit hit;
	bool fault_seen;              /* a synchronous fault stopped it at fault_pc */
	uint64_t fault_pc;
	struct gb_stop fault;
};

struct patch_thread {
	bool known;
	unsigned k;                   /* its area (gs base gb_jit__tls(k)) */
	bool skip;                    /* its next record of skip_pc is one seen already */
	uint64_t skip_pc;
	bool fs_watch;                /* fs base 0 (libc not set up yet): runs with
				       * PTRACE_SYSCALL until it sets one */
	unsigned sigret;              /* handlers in flight whose rt_sigreturn it runs
				       * with PTRACE_SYSCALL for (nested ones too) */
	bool cache_frame;             /* a signal was delivered to it at a pc of the
				       * cache (it could not be put out): a frame on its
				       * stack may return there, so the end keeps the
				       * cache mapped and its gs base */
	bool in_cache;                /* the end left it in the cache (the same) */
	/* An asynchronous signal taken later (trap/patch/later.c): its number
	 * (0: none), re-sent (its next stop with it is the one), postponed so
	 * many times in a row, its first siginfo. */
	int later_sig;
	bool later_sent;
	unsigned later_n;
	siginfo_t later_si;
	struct patch_probe_thread pp;
};

struct patch_trap {
	struct gb_trap base;
	struct gb_trace_range *range;
	pid_t pid;
	uint64_t start, end;          /* the range (run-time, inclusive) */
	uint8_t *code;                /* its original bytes (+ GB_INSN_MAX_LEN) */
	struct patch_insns *insns;    /* the instructions patch_fetch handed out
				       * (core.c), owned here until patch_unbuild */
	struct gb_jitmap map;
	struct gb_jit *j;
	struct gb_patch_plan plan;
	bool written;                 /* the patches are in the target */
	struct gb_jit_cursor cur;
	ssize_t area_of[GB_JIT_TLS_COUNT]; /* area k -> thread index (-1: none;
					     * AREA_UNTRACED: a vfork child's) */
	unsigned nareas;              /* areas handed out so far (area_new) */
	unsigned freed[GB_JIT_TLS_COUNT]; /* ... and given back by threads that
					  * exited (their records drained) */
	unsigned nfreed;
	ssize_t cur_i;                /* the thread whose stretch the ring is at */
	/* The ring's last instruction record, read but not yet a line: its
	 * instruction may not have run (written before it runs, it may still
	 * fault, or be taken back by unwinding); a later record, or a drain
	 * with no thread in a stretch, makes it a line.  recs[held_slot] is
	 * it, the other slot the next record read: the two swap (a record is
	 * ~1 KB, its room for a zmm's 64 accesses: copied once per
	 * instruction, it was a third of the drain's time). */
	struct gb_jit_rec recs[2];
	unsigned held_slot;
	ssize_t held_i;               /* its thread; recs[held_slot] is valid when has_held */
	bool has_held;
	uint64_t late;                /* records read before unwinding took them back */
	uint64_t handled;             /* signals taken at an original boundary */
	uint64_t marks;               /* stretch markers drained: entries (statistics) */
	uint64_t misses;              /* in-range lookup misses (stretches run natively) */
	uint64_t records;             /* instruction records drained (statistics) */
	uint64_t blocks, tinsns;      /* blocks and instructions translated by the
				       * caches of earlier images (statistics) */
	unsigned npatched;
	/* Across exec and a module mapped late (trap/patch/exec.c): */
	bool waiting;                 /* the range's module is not mapped: threads
				       * run with PTRACE_SYSCALL, looked for after
				       * each mmap */
	bool due;                     /* the range is known: set up at the next
				       * before_run */
	struct gb_trap *instead;      /* the trap used for the image the patch
				       * trap did not apply to (owned) */
	unsigned images;              /* images it was set up in */
	bool quiet;                   /* not asked for: a later refusal is said under -v */
	struct gb_probes *probes;     /* uprobes at the entries not patched, or NULL */
	unsigned nprobed;
	uint64_t probe_hits;          /* entries through them (statistics) */
	uint64_t probe_waits;         /* ... that found the lock held (stayed stopped) */
	uint64_t later;               /* signals taken later (trap/patch/later.c) */
	uint64_t later_native;        /* ... put off too often: taken at their native copy */
	/* Counting after the budget (trap/patch/count.c): */
	bool twins;                   /* the cache has counting twins */
	bool counting;                /* its switch is on */
	uint64_t counted;             /* instructions the twins counted (statistics) */
};

/* The engine's loop waits this long for a stop while threads run natively
 * (the trap's poll_ms), then drains the ring (and at each wake of the
 * cache: gb_jit__ring_waker). */
#define PATCH_POLL_MS 20

struct user_regs_struct;
struct gb_tracee;

/* core.c.  The instruction at pc, decoded from the range's original bytes
 * (read from the process outside the range), or NULL.  The trap owns it
 * (pt->insns): one place per pc, which stays until patch_unbuild (a new
 * image) or the trap's free, so the translator may keep the pointers it is
 * given across later fetches (a pc outside the range is read and decoded
 * again into its place at each fetch).  ctx: the patch_trap. */
const struct gb_insn *patch_fetch(void *ctx, uint64_t pc);
/* Every instruction patch_fetch handed out is freed. */
void patch_insns_free(struct patch_trap *pt);
/* The entry block of pc (translating it), or 0. */
uint64_t patch_entry_of(struct patch_trap *pt, uint64_t pc);
/* The ring's records become lines; the last is held back (pt->recs)
 * unless settled: no thread can be running an instruction of the cache
 * (the lock is gebpf's, or every thread is stopped out of a stretch).
 * _fault: the last record's instruction raised that signal (its thread
 * stopped at it): its completed accesses only. */
void patch_drain(struct patch_trap *pt, struct gb_engine *e, bool settled);
void patch_drain_fault(struct patch_trap *pt, struct gb_engine *e, const struct gb_stop *fault,
		       bool settled);
/* In-range misses counted, their targets translated unless held (every
 * thread stopped: only counted). */
void patch_collect_misses(struct patch_trap *pt, bool held);
/* The instructions under the patches: translated (translate) and put in
 * the lookup table last.  0, or -ENOSPC. */
int patch_guard_inside(struct patch_trap *pt, bool translate);
/* Does the process catch sig (a handler will run)? */
bool patch_caught(pid_t pid, int sig);
/* An area for a new thread: one an exited thread gave back, else the next
 * never used; -1 when all GB_JIT_TLS_COUNT are in use. */
int patch_area_new(struct patch_trap *pt);
/* The entries' bytes in process pid: the patches, or with orig the
 * original bytes. */
void patch_write(struct patch_trap *pt, pid_t pid, bool orig);
static inline bool patch_in_range(const struct patch_trap *pt, uint64_t pc)
{
	return pc >= pt->start && pc <= pt->end;
}

/* probe.c: the entries the planner refused keep a uprobe (the probe
 * trap's machinery, trap/probes/probes.h, over them alone).
 * Attach them (refused: run-time addresses, ascending; the module's file,
 * link-time range, bias): 0, or -1 with one line said. */
int patch_probe_attach(struct patch_trap *pt, const char *path, uint64_t lo, uint64_t hi,
		       uint64_t bias, const uint64_t *refused, size_t n);
/* A signal stop of thread i: true when it is a probe's (verdict in *v). */
bool patch_probe_classify(struct patch_trap *pt, struct gb_engine *e, size_t i,
			  const struct gb_stop *st, enum gb_trap_verdict *v);
/* The trap's enter hook: a thread stopped after a probed entry goes on. */
int patch_probe_enter(struct gb_trap *t, struct gb_engine *e, size_t i);
/* Redirects (where the kernel can: the hit goes straight to the entry
 * block): thread tid got an area; the patches are in place (on) or go. */
void patch_probe_known(struct patch_trap *pt, pid_t tid);
void patch_probe_redirect(struct patch_trap *pt, bool on);
/* The end (redirects off first): hits of threads still waiting are not in
 * the trace. */
void patch_probe_teardown(struct patch_trap *pt, struct gb_engine *e);

/* count.c: counting after the budget (docs/trace.md "Counting after the
 * budget").  At an idle and between a drain's batches: the switch turned on
 * once the writer is full (no
 * --max-insns), every area's counts added to the writer's.  Area k's
 * counts added (a thread exiting: before the area is reused); every area's
 * (an exec, the end).  A twin's instruction that faulted (thread i stopped
 * at it, area k, after gb_jit__unwind): its exec and completed accesses
 * counted.  The statistics so far (-v) and the warnings for what is not
 * exact: patch_report. */
void patch_count_switch(struct patch_trap *pt, struct gb_engine *e);
void patch_count_idle(struct patch_trap *pt, struct gb_engine *e);
void patch_count_area(struct patch_trap *pt, struct gb_engine *e, unsigned k);
void patch_count_all(struct patch_trap *pt, struct gb_engine *e);
void patch_count_fault(struct patch_trap *pt, struct gb_engine *e, size_t i,
		       const struct user_regs_struct *r, const struct gb_stop *st, unsigned k);
void patch_report(struct patch_trap *pt);

/* later.c: an asynchronous signal that stopped thread i (regs r) in the
 * copy of a patch's instructions is taken later (true: not delivered now):
 * the idle re-sends it once the thread runs (resend); its stop gets its
 * first siginfo back (arrived: call at every signal stop); a signal taken
 * resets the count; at the end one not re-sent yet is left pending; taken
 * returns whether it had been put off too often.  Such a one is taken
 * where the trap's take_signal (trap.c) put the thread, but for a pc inside a patch's bytes,
 * which native moves (r and the thread's registers) to its copy in the
 * patch's entry block: true. */
bool patch_later(struct patch_trap *pt, struct gb_engine *e, size_t i, const struct gb_stop *st,
		 const struct user_regs_struct *r);
bool patch_later_native(struct patch_trap *pt, struct gb_engine *e, size_t i,
			struct user_regs_struct *r);
void patch_later_resend(struct patch_trap *pt, struct gb_engine *e);
void patch_later_arrived(struct gb_engine *e, size_t i, const struct gb_stop *st);
bool patch_later_taken(struct gb_engine *e, size_t i);
void patch_later_end(struct gb_engine *e);

/* unwind.c: thread i (stopped, registers r) in the cache is put at its
 * original instruction boundary (gb_jit__unwind: its own registers, the
 * lock released if it held it, records of what it did not run taken back).
 * fault: it stopped at an instruction's copy for a fault that instruction
 * raised (put at it, its saved registers reloaded, its record kept).
 * 0, -ESRCH (it died), -EAGAIN (not in the cache's code). */
int patch_unwind(struct patch_trap *pt, struct gb_engine *e, size_t i,
		 struct user_regs_struct *r, const struct gb_stop *fault);

/* new.c: the trap's state over the stopped tracee t's range (the module
 * file path, link-time lo..hi, run-time = + bias): cache, translations,
 * plan.  NULL, or why not (pt as after patch_unbuild; "" when said
 * already). */
const char *patch_build(struct patch_trap *pt, struct gb_tracee *t, const char *path, uint64_t lo,
			uint64_t hi, uint64_t bias, char *buf, size_t len);
/* No cache, no plan, no areas (the target is not touched). */
void patch_unbuild(struct patch_trap *pt);
/* Thread i (registers r) gets area k: gs base, fs base registered.  0 or
 * -1 (it died). */
int patch_give_area(struct patch_trap *pt, struct gb_engine *e, size_t i, unsigned k,
		    struct user_regs_struct *r);
/* The start hook: every thread stopped, gs bases set, threads in the range
 * (or inside a patch's bytes) moved into the cache, the patches written. */
void patch_start(struct gb_trap *t, struct gb_engine *e);

/* end.c: the teardown hook (every thread held); every stopped thread's gs
 * base 0 but those the end leaves with the cache (in it, or a frame that
 * returns to it) (the first such thread's index, to unmap the cache
 * through, or -1); the free hook. */
void patch_teardown(struct gb_trap *t, struct gb_engine *e);
ssize_t patch_gs_zero(struct gb_engine *e);
void patch_free(struct gb_trap *t);

/* child.c: the child hook (fork, vfork). */
void patch_child(struct gb_trap *t, struct gb_engine *e, pid_t child, enum gb_trap_child ev);

/* exec.c: the hooks for exec and for a range whose module is mapped later
 * (docs/trace.md "The patch trap"). */
void patch_exec(struct gb_trap *t, struct gb_engine *e);
void patch_before_run(struct gb_trap *t, struct gb_engine *e);
/* Thread i at a syscall-exit stop: a pending range looked for. */
void patch_pending_exit(struct patch_trap *pt, struct gb_engine *e, size_t i);

#endif
