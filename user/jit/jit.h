/* The translating engine's code cache (docs/trace.md "Engines").
 *
 * A region of the target's address space, shared with gebpf: code (mapped
 * read+exec in the target, written by gebpf through its own mapping) and
 * data (save slots, the ring head and budget, the record ring).  The range's
 * basic blocks are copied there, each original instruction preceded by code
 * that appends its record to the ring: its id, then the effective address
 * of each access whose address depends on registers (the access plan of
 * user/decode says which accesses, their sizes and their order).  The
 * instrumentation uses only mov and lea (no flags), two registers saved in
 * the slots, and never the stack (the stop-free mode's owner check aside:
 * 16 bytes below the red zone, owner.c).
 *
 * Every way out of translated code is an exit stub: it saves rax, rcx and
 * r11, makes a getpid system call (gebpf, tracing with PTRACE_SYSCALL,
 * stops it there, drains the ring and puts the thread at the stub's
 * original target), restores them and jumps to the original target.  So a
 * thread left in the cache when gebpf is gone runs on correctly: records
 * are dropped, the code continues at original addresses.
 *
 * That is the mode trace/ejit.c uses.  The stop-free mode (gb_jit__new_opts,
 * below; lock.c, ibl.c, ring.c) has no stops at all: see its comment.
 *
 * This room knows nothing of ptrace: the engine (trace/ejit.c) maps the
 * region, runs threads in it and asks here what a cache address means.
 */
#ifndef GB_JIT_JIT_H
#define GB_JIT_JIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "decode/decode.h"

/* Layout of the shared region (code, then data). */
#define GB_JIT_CODE_SIZE   (8u << 20)
#define GB_JIT_DATA_SLOTS  4096u                  /* slots, head, budget */
#define GB_JIT_RING_SIZE   (16u << 20)
#define GB_JIT_DATA_SIZE   (GB_JIT_DATA_SLOTS + GB_JIT_RING_SIZE)
#define GB_JIT_SIZE        (GB_JIT_CODE_SIZE + GB_JIT_DATA_SIZE)
/* Instructions per block at most: the budget check at a block's head
 * guarantees ring room for one whole block. */
#define GB_JIT_BLOCK_INSNS 16

struct gb_jit;

/* Where the region is: in gebpf (code, data) and in the target. */
struct gb_jit_mem {
	uint8_t *code;        /* gebpf's view, GB_JIT_CODE_SIZE bytes */
	uint8_t *data;        /* gebpf's view, GB_JIT_DATA_SIZE bytes */
	uint64_t code_addr;   /* the target's addresses of the same bytes */
	uint64_t data_addr;
};

/* The decoded instruction at pc (original bytes), or NULL. */
typedef const struct gb_insn *(*gb_jit_fetch_fn)(void *ctx, uint64_t pc);

struct gb_jit *gb_jit__new(const struct gb_jit_mem *m, uint64_t start, uint64_t end);

/* The stop-free mode (docs/trace.md "A trap without stops (in progress)"):
 * entries are entry blocks that take a lock word in the data part, exits
 * are jumps (the lock released), ret and indirect jmp/call look their
 * target up in a table in the code region, system calls in the range are
 * made without the lock, and the ring is drained by a consumer while the
 * program runs.  Each thread of the target needs its own area of the data
 * part as its gs base (gb_jit__tls): the mode is for programs that leave gs
 * alone (gs base 0). */
struct gb_jit_opts {
	bool nostop;
	uint32_t ring_timeout_ms;   /* the writer's wait for the consumer (0: 1000) */
	/* Entry blocks check that the thread is its area's owner (its fs base
	 * the one gb_jit__area_fs registered) before they touch the area: a
	 * thread that is not (one made when nobody gave it an area: gebpf's
	 * worker gone) runs the entry's instructions natively from a copy.
	 * Needs read (the target's memory) for gb_jit__unwind of a thread in
	 * the check, whose rax and rcx are on its stack below the red zone.
	 * The owner's key is its fs base, read with rdfsbase (the kernel's
	 * FSGSBASE: AT_HWCAP2 bit 1); owner_tcb: where that is missing, the
	 * word at fs:0 (the TLS ABI's TCB self-pointer), which
	 * gb_jit__area_fs then reads through read. */
	bool owner_check;
	bool owner_tcb;
	int (*read)(void *ctx, uint64_t addr, void *buf, size_t n);   /* 0 or -1 */
	void *read_ctx;
	/* Counting twins of every block (twin.c; docs/trace.md "Counting after
	 * the budget"): in counting mode (gb_jit__counting) an entry goes to
	 * its twin, which runs the original instructions and only adds the
	 * block's counts to the thread's area (gb_jit__count_take). */
	bool twins;
	/* Every twin head adds the block's counts to the thread's sets, none
	 * a block counter of its own: the form of the twins made after the
	 * block counters are all given out (for tests). */
	bool twin_sets;
	/* --values (user/jit/vals.c; the mode with stops only): each record
	 * also holds the values the instruction read and wrote and the
	 * registers it wrote (struct gb_jit_rec .vals); only instructions
	 * whose values the cache can take are translated. */
	bool values;
};
/* Harmless without gebpf (live.c; docs/trace.md "Harmless without gebpf"):
 * the cache serves only while gebpf says it does.  gb_jit__live_start (the
 * thread that traces, before any patch is written): this thread holds the
 * cache's liveness word, which the kernel marks when the thread dies, however
 * it dies.  gb_jit__live_end: gebpf lets go of the cache (the end of a trace,
 * an exec, a failure; gb_jit__free does it too).  From then on every thread
 * of the target that reaches the cache runs the original code: an entry
 * block sends it to the native copy of the entry's instructions, a system
 * call of the range returns to the original code, a wait for the lock gives
 * its ticket up (within GB_JIT_LOCK_SLEEP_MS), the ring's writer drops at
 * once.  gb_jit__live: the word says gebpf serves it. */
#define GB_JIT_LIVE_GONE 0x40000000u   /* FUTEX_OWNER_DIED: the word once gone */
#define GB_JIT_LOCK_SLEEP_MS 10
int gb_jit__live_start(struct gb_jit *j);
void gb_jit__live_end(struct gb_jit *j);
bool gb_jit__live(const struct gb_jit *j);
/* A thread in a stretch under way when gebpf goes leaves it at its next
 * block head for the block's original code, natively: the block's pc, or,
 * strictly inside the instructions a patch covers, their copy in the
 * patch's entry block (whose patches must be in place: call it once they
 * are written, and after each translation).  Blocks with no way yet (0)
 * run on translated, dropping their records.  Returns the ways set now. */
size_t gb_jit__ways(struct gb_jit *j);
/* The copy of the original instruction at pc in an entry block's native
 * copy (owner.c: the instructions a patch covers, relocated), or 0. */
uint64_t gb_jit__native_at(const struct gb_jit *j, uint64_t pc);

/* The cache's header (live.c), in its data part: what a later gebpf reads to
 * recognise a cache an earlier one left in a target (docs/trace.md "What an
 * earlier gebpf left").  Written by gb_jit__mark, before any patch. */
#define GB_JIT_HDR_MAGIC   "gebpf-cc"
#define GB_JIT_HDR_VERSION 1u
#define GB_JIT_HDR_OFF     512u        /* from the data part's start */
struct gb_jit_hdr {
	char magic[8];
	uint32_t version, size;       /* GB_JIT_HDR_VERSION, sizeof */
	uint64_t code_addr;           /* the cache (code part; the data part follows) */
	uint64_t start, end;          /* the range it translated (run-time, inclusive) */
	uint32_t gone_off;            /* the liveness word's byte 3, from the data part */
	int32_t worker;               /* the pid of the gebpf that made it (its namespace's) */
	char module[256];             /* the range's file */
};
void gb_jit__mark(struct gb_jit *j, const char *module);
/* Is buf (at least sizeof(struct gb_jit_hdr) bytes read at a data part's
 * GB_JIT_HDR_OFF) a header of this version? */
bool gb_jit__hdr_ok(const struct gb_jit_hdr *h);

#define GB_JIT_TLS_COUNT 256u       /* threads (areas at the end of the data part) */
#define GB_JIT_TLS_SIZE  4096u      /* its slots, then its twins' block counters */
struct gb_jit *gb_jit__new_opts(const struct gb_jit_mem *m, uint64_t start, uint64_t end,
				const struct gb_jit_opts *o);
/* Target address of per-thread area k (a thread's gs base). */
uint64_t gb_jit__tls(const struct gb_jit *j, unsigned k);
/* Stop-free mode: the entry block of entry address pc (take the lock, then
 * the block at pc), translating what it needs; 0 as gb_jit__block. */
uint64_t gb_jit__entry(struct gb_jit *j, uint64_t pc, gb_jit_fetch_fn fetch, void *ctx);
/* ... for an entry whose patch is len bytes (2: a short jump, jit/patch.h;
 * gb_jit__entry: 5): the native copy of its owner check covers those
 * bytes' instructions, not one more (the next may be an entry, patched). */
uint64_t gb_jit__entry_len(struct gb_jit *j, uint64_t pc, unsigned len, gb_jit_fetch_fn fetch,
			   void *ctx);
/* Translate the block at pc and every block of the range its direct exits
 * and return sites reach (the closure gebpf would otherwise build one stop
 * at a time).  0, or -ENOSPC / -EINVAL when one did not translate. */
int gb_jit__translate_from(struct gb_jit *j, uint64_t pc, gb_jit_fetch_fn fetch, void *ctx);
/* Add the translated block at pc to the lookup table (gebpf at a lookup's
 * miss stop, after gb_jit__block; gb_jit__block does it for each block). */
void gb_jit__table_put(struct gb_jit *j, uint64_t pc);
/* The target a lookup of the thread with this gs base missed
 * (gb_jit_loc.lookup_miss), or 0. */
uint64_t gb_jit__lookup_target(const struct gb_jit *j, uint64_t gs_base);
/* The lock (a ticket lock: threads get it in the order they asked): the
 * tickets taken and not yet done, 0 free, 1 held, more: held with that
 * many - 1 waiting (a ticket given up and not yet passed counts too). */
uint32_t gb_jit__lock_word(const struct gb_jit *j);
/* gebpf's side of the lock: take it if it is free (nobody holds or waits
 * for it), never waiting: 1 taken, 0 held by somebody (a thread of the
 * target in the range). */
int gb_jit__lock_try(struct gb_jit *j);
/* ... or else take a ticket and wait for its turn up to us microseconds
 * (spinning: gebpf never sleeps in the lock's futex), giving the ticket up
 * when it is not served in time; a thread holds it for one stretch at a
 * time (the range's code between an entry and an exit), so a busy range
 * serves a ticket within microseconds per thread ahead: 1 taken, 0 not in
 * time. */
int gb_jit__lock_try_for(struct gb_jit *j, unsigned us);
/* Release it from outside, as the release routine does (after
 * gb_jit__lock_try, or for a thread unwound holding it): serve the next
 * ticket, wake its taker if it sleeps (the futex is not private: gebpf's
 * mapping of a shared cache wakes the target's waiters). */
void gb_jit__lock_release(struct gb_jit *j);
/* Give up ticket t (its taker unwound out of the acquire before its turn):
 * the release that serves it serves the next.  1 when t was served
 * already and is now the caller's to release, else 0. */
int gb_jit__lock_abandon(struct gb_jit *j, uint32_t t);
/* Finish a release from outside (its taker unwound after it had served
 * the next ticket: a given-up ticket skipped, the next taker woken). */
void gb_jit__lock_post(struct gb_jit *j);
/* Wake ticket t's taker (asleep on its word): for gb_jit__unwind of a
 * releaser that took the taker's sleep mark but had not woken it yet. */
void gb_jit__lock_wake(struct gb_jit *j, uint32_t t);
/* gebpf hands the lock it holds (gb_jit__lock_try) to a thread of area k
 * it is about to resume at the returned address: the translated block at
 * pc (translated if needed, the ring drained), after area k's stretch
 * marker written at the ring's head as the acquire writes it, so the
 * thread's records follow its marker as if it had come through an entry
 * block (the entry of an instruction that ran outside the cache: a uprobe's
 * hit).  The thread releases the lock at its exit.  0 (nothing written):
 * no block for pc, or not the stop-free mode. */
uint64_t gb_jit__enter_held(struct gb_jit *j, unsigned k, uint64_t pc, gb_jit_fetch_fn fetch,
			    void *ctx);

/* Per-thread areas (stop-free mode).  Area k's stretches are announced in
 * the ring by a marker record naming k (struct gb_jit_rec, kind
 * GB_JIT_REC_MARK), written at every acquisition of the lock (an entry
 * block, the re-acquire after a system call of the range); the consumer
 * (gb_jit__ring_poll) resolves fs-relative accesses of the records after
 * it with the fs base registered for k here (0 until registered).
 * gs-relative accesses are never translated in this mode (gs is the
 * cache's): such an instruction is not translatable (gb_jit__entry /
 * gb_jit__translate_from fail, the patch planner says CANNOT_MOVE).  It
 * also names the area's owner for the owner check (owner.c): its fs base,
 * or with owner_tcb the word the target holds at it (0 for an fs base 0;
 * the fs base itself when that word cannot be read). */
void gb_jit__area_fs(struct gb_jit *j, unsigned k, uint64_t fs_base);
/* A clone's child gets area child: a copy of area parent's bytes (it may
 * be inside the cache, after an in-range clone), except what names the
 * area (its marker); its fs base as registered for parent until
 * gb_jit__area_fs says otherwise. */
void gb_jit__area_clone(struct gb_jit *j, unsigned child, unsigned parent);

/* Unwinding (stop-free mode): a thread of the target, stopped (ptrace)
 * with rip anywhere in the code region, put back at an original
 * instruction boundary as the program would be there natively.  regs (the
 * thread's registers, PTRACE_GETREGS; gs_base its area's address) are
 * rewritten in place: rip the original pc, every general register its
 * program value (live, from the global save slots, or from the thread's
 * area), eflags (where the code saved them with lahf/seto), orig_rax -1
 * when the thread stood in a system call of the cache's own (the futex
 * of the lock, an exit stub's getpid: not to be restarted at the original
 * pc; a system call of the program's own keeps it, rip after it, so the
 * kernel restarts it there as it would natively).  fs_base and gs_base are
 * left as they are.  When the thread held the lock, the call releases it
 * (waking a waiter).  A record written for an instruction that has not
 * run (or a marker of a stretch that has not begun) is taken off the
 * ring's head: call it with the thread stopped BEFORE polling the ring
 * past its stop; c (the consumer's cursor, or NULL) is adjusted when it
 * has looked at those words but not read them; instruction records among
 * them it has read already are counted in .late_recs (the consumer drops
 * that many of the last it got; a marker it read needs nothing: the next
 * word written is a marker again).  A thread that held the lock at a head
 * that ran out of the ring's budget (on its way to the ring's slow path,
 * or waiting there at a pass's end) with nothing after its stretch's
 * marker has that marker taken back too: it comes back through an entry
 * block, whose acquire writes another before that head, where the budget
 * counts one.
 * 0; -ENOENT when rip is not in the code region (regs untouched); -EINVAL
 * in the other mode, or when gs_base is not an area. */
struct user_regs_struct;
struct gb_jit_unwound {
	uint64_t pc;          /* the original pc (regs->rip now) */
	uint8_t ns;           /* where it was (enum gb_jit_ns_kind; NONE: a
			       * translated instruction or block head) */
	bool held;            /* it held the lock (released now) */
	bool recorded;        /* the instruction at pc has its record in the
			       * ring already and could not be taken back (the
			       * lock was released after it: a system call of
			       * the range stopped before it was made); the
			       * thread's next record of pc is that same
			       * instruction again */
	uint32_t dropped;     /* ring words taken off the head */
	uint32_t late_recs;   /* instruction records the cursor had read
			       * already among them: drop them too */
};
struct gb_jit_cursor;
int gb_jit__unwind(struct gb_jit *j, struct user_regs_struct *regs, struct gb_jit_cursor *c,
		   struct gb_jit_unwound *out);

/* A SIGSEGV stop of a thread at an entry block's owner check (its stores
 * below the red zone found no stack there): regs (PTRACE_GETREGS) moved
 * past the check, as the area's owner, and true (the fault is the cache's:
 * not for the program); false, untouched, for any other rip. */
bool gb_jit__owner_fault(const struct gb_jit *j, struct user_regs_struct *regs);

/* In-range targets the cache did not have a block for (stop-free mode): a
 * lookup (ret, indirect jmp/call) missing inside the range, or an exit
 * stub to an untranslated direct target of the range.  Both go on
 * natively (the stretch unrecorded from there until the next entry), and
 * are counted, the last GB_JIT_MISS_LOG targets kept in the data part.
 * Read and clear (with the lock held by gebpf, gb_jit__lock_try, so no
 * thread is writing): count, the misses since the last clear; n of them
 * in pc (the most recent, oldest first; repeated targets appear as often
 * as they missed).  gebpf translates them (gb_jit__translate_from) and
 * says the count: the trace is not exact for those stretches. */
#define GB_JIT_MISS_LOG 256u
struct gb_jit_misses { uint64_t count; size_t n; uint64_t pc[GB_JIT_MISS_LOG]; };
void gb_jit__misses(struct gb_jit *j, struct gb_jit_misses *out, bool clear);
void gb_jit__free(struct gb_jit *j);

/* Can the instruction run translated?  (Otherwise the step engine runs it.) */
bool gb_jit__supported(const struct gb_insn *in);
/* ... in the stop-free mode (which also takes syscall, and refuses
 * gs-relative memory and calls/jumps through fs memory): for the trap's
 * sweep of the range and the patch planner. */
bool gb_jit__nostop_supported(const struct gb_insn *in);
/* Is it one gebpf performs at an exit stub's stop (near call, ret, indirect
 * jmp: their targets are known only then)? */
bool gb_jit__emulated(const struct gb_insn *in);

/* Target address of the translated block at pc, translating it (and
 * linking a pending exit to it) if needed; 0 when the instruction at pc is
 * not translatable (or the cache is out of room: gb_jit__flush and retry).
 * Translating is done only with the ring drained. */
uint64_t gb_jit__block(struct gb_jit *j, uint64_t pc, gb_jit_fetch_fn fetch, void *ctx);
/* Forget every translation (code changed, or the cache is full). */
void gb_jit__flush(struct gb_jit *j);

/* Every original instruction translated: for re-checking their bytes. */
size_t gb_jit__ninsns(const struct gb_jit *j);
void gb_jit__insn_bytes(const struct gb_jit *j, size_t id, uint64_t *pc, const uint8_t **bytes,
			uint8_t *len);
/* [lo, hi): the original bytes they were translated from span at most this. */
void gb_jit__span(const struct gb_jit *j, uint64_t *lo, uint64_t *hi);

/* The ring: empty it (head at its start, budget full), and read it. */
void gb_jit__ring_reset(struct gb_jit *j);
size_t gb_jit__ring_used(const struct gb_jit *j);        /* words */
size_t gb_jit__ring_words(const struct gb_jit *j);       /* its room, words */
/* Drop the last words written (a rolled-back instruction). */
void gb_jit__ring_unwrite(struct gb_jit *j, size_t words);

/* Stop-free mode, the consumer's side of the ring (while the program
 * runs): poll gives the next record (1), 0 when there is none yet; commit
 * tells the writer how far the consumer has read (the writer waits for it
 * at the end of each pass of the ring); wait sleeps until the writer says
 * the ring is half full, or ms. */
struct gb_jit_cursor {
	uint64_t base; size_t pos, limit;
	unsigned area;        /* the area of the last marker read (whose fs
			       * base resolves the records after it); a
			       * zeroed cursor is the ring's start */
	size_t mark;          /* pos just after the last marker read in this
			       * pass (0: none; SIZE_MAX: unknown, gb_jit__unwind
			       * took it back): the last record read is a marker
			       * when mark == pos */
};
struct gb_jit_rec;
/* Records come in ring order: a marker (GB_JIT_REC_MARK, .area k), then
 * the instructions of that thread's stretch (GB_JIT_REC_INSN), fs-relative
 * addresses resolved with area k's fs base (gb_jit__area_fs). */
int gb_jit__ring_poll(struct gb_jit *j, struct gb_jit_cursor *c, struct gb_jit_rec *out);
void gb_jit__ring_commit(struct gb_jit *j, const struct gb_jit_cursor *c);
int gb_jit__ring_wait(struct gb_jit *j, unsigned ms);
/* A thread of this process asleep on the ring's wake word that sends sig
 * to thread tid of this process at each wake of the writer (half-way
 * through the ring's room, the end of a pass): a consumer that waits for
 * sig with a long timeout drains the ring as it fills.  Stopped by
 * gb_jit__ring_waker_stop or gb_jit__free.  0 or -errno. */
int gb_jit__ring_waker(struct gb_jit *j, pid_t tid, int sig);
void gb_jit__ring_waker_stop(struct gb_jit *j);
/* dropping: the writer gave up waiting (the consumer gone), the records
 * after the ring's last pass are not written, dropped counts them. */
struct gb_jit_ring_state { bool dropping; uint64_t dropped, consumed; };
void gb_jit__ring_state(const struct gb_jit *j, struct gb_jit_ring_state *st);

/* One record, decoded from the ring: an instruction's (the old mode has
 * only these), or a stop-free mode's stretch marker (one word). */
enum gb_jit_rec_kind { GB_JIT_REC_INSN, GB_JIT_REC_MARK };
struct gb_jit_rec {
	uint64_t pc;
	uint8_t len;
	uint8_t kind;         /* enum gb_jit_rec_kind; a marker has pc 0, no access */
	int nacc;
	unsigned area;        /* GB_JIT_REC_MARK: the area k of the thread whose
			       * stretch begins (the lock just taken) */
	/* --values (gb_jit_opts.values): the record's values (user/jit/vals.c:
	 * each reference's, then each written register's, in whole words),
	 * or NULL; vdone: the part after the instruction filled its registers
	 * and writes, or it has none (false: gebpf takes them from the
	 * thread, as for vemu, an instruction it performs). */
	const uint8_t *vals;
	bool vdone, vemu;
	struct gb_access acc[64];     /* (a gather, a masked move: one per element; 64 bytes of a zmm;
				       * last: a record's head is one cache line) */
};
/* Decode the record at word *pos of the ring (advancing *pos): 1, 0 at the
 * end, -EINVAL when the ring holds garbage.  fs/gs: the thread's bases (in
 * the stop-free mode fs_base is used for every record: the consumer that
 * resolves per area is gb_jit__ring_poll). */
int gb_jit__ring_next(const struct gb_jit *j, size_t *pos, uint64_t fs_base, uint64_t gs_base,
		      struct gb_jit_rec *out);

/* The stop-free mode's pieces of code (struct gb_jit_loc.ns). */
enum gb_jit_ns_kind {
	GB_JIT_NS_NONE,
	GB_JIT_NS_LOCK,      /* the shared acquire/release routines: the thread's
			      * area holds its rax, rcx and its way back (T_RET) */
	GB_JIT_NS_ENTRY,     /* an entry block (taking the lock) */
	GB_JIT_NS_SYSCALL,   /* a system call made without the lock */
	GB_JIT_NS_EXIT,      /* a direct exit: the lock released, then a jump */
	GB_JIT_NS_LOOKUP,    /* ret / indirect jmp / call: the table lookup */
	GB_JIT_NS_RING,      /* the ring's slow path (wake, wait, drop) */
	GB_JIT_NS_NATIVE,    /* an entry's instructions run natively from a copy
			      * by a thread not its area's owner (owner.c,
			      * reloc.h; pc the instruction, a branch's target,
			      * or where the copy jumps back) */
};

/* What a target rip in the code region means, for putting the thread back
 * at an original instruction boundary. */
struct gb_jit_loc {
	uint64_t pc;          /* original address to continue at */
	uint32_t restore;     /* enum gb_reg slots (bit r) to reload from save slots */
	uint32_t unwrite;     /* ring words to drop (an instruction not run) */
	bool at_insn;         /* rip is at the copy of the instruction at pc: a
			       * fault raised there was raised by it (its record
			       * is the ring's last: keep it, unwrite is 0) */
	bool stub;            /* an exit stub (pc: its target) */
	bool stub_call;       /* ... stopped at its system call */
	bool emulate;         /* ... for the instruction at pc (a call, ret or
			       * indirect jump: gebpf performs it; its record is
			       * the ring's last, unwrite says how long) */
	uint8_t ns;           /* stop-free mode: enum gb_jit_ns_kind (pc: the
			       * original instruction, 0 in a shared routine) */
	bool twin;            /* ... in a counting twin (at_insn: its copy of
			       * the instruction at pc; unwinding takes the
			       * instruction's counts back) */
	bool post;            /* --values: after the instruction before pc, in
			       * the part that takes its values (its record
			       * is the ring's last, not done: take them from
			       * the thread) */
	bool lookup_miss;     /* ... stopped at a lookup's in-range miss: the
			       * target is the thread area's T_TGT slot; after
			       * gb_jit__block and gb_jit__table_put for it, put
			       * the thread at retry */
	uint64_t retry;
};
/* 0, or -ENOENT when rip is not in the code region (or in nothing known). */
int gb_jit__locate(const struct gb_jit *j, uint64_t rip, struct gb_jit_loc *out);
/* The value register slot r (enum gb_reg) was saved in. */
uint64_t gb_jit__saved(const struct gb_jit *j, unsigned r);
bool gb_jit__in_code(const struct gb_jit *j, uint64_t rip);

struct gb_jit_stats {
	uint64_t blocks, insns, stubs, links, flushes, entries;
	uint64_t owner_checks;   /* entry blocks with the owner check (owner.c) */
	uint64_t twins;          /* counting twins made (twin.c) */
	uint64_t twin_heads;     /* twin heads emitted (twin_block.c; a pass that ran out of room counts too) */
	uint64_t twin_heads_live; /* of them with the flags live at the block's start */
	uint64_t twin_heads_moved; /* of those, placed later in the block where they are dead */
	uint64_t twin_heads_own; /* twin heads adding to a block counter of their own */
	uint64_t twin_full;      /* twin passes that ran out of room */
	uint64_t exits_learned;  /* gb_jit__learn_exits */
};

/* Counting mode (twin.c, twin_unwind.c; docs/trace.md "Counting after the
 * budget"), with gb_jit_opts.twins.  gb_jit__twins: the twin of every
 * block (and of every acquire site's pc) that has none, made, linked and
 * published, and from then on gb_jit__translate_from and gb_jit__entry make
 * them too (a set-up translates its blocks first, so twins never take the
 * room they need): 0, or -ENOSPC (the blocks without one keep recording).  Call it as gb_jit__translate_from
 * (the lock held, or no thread in the range).  gb_jit__twin: pc's twin
 * (0: none, or its first instruction is left to the recording block). */
int gb_jit__twins(struct gb_jit *j, gb_jit_fetch_fn fetch, void *ctx);
uint64_t gb_jit__twin(const struct gb_jit *j, uint64_t pc);
/* The switch (a byte of the data part): on, every entry (and the
 * re-acquire after a system call of the range) whose site has a twin runs
 * it instead of taking the lock; a thread in a recording stretch finishes
 * it as before. */
void gb_jit__counting(struct gb_jit *j, bool on);
/* The targets out of the range that the twins of areas 0..nareas-1 last
 * left for (a ret to a caller) become keys of the lookup table (into free
 * home slots only), so the next lookups of them are hits: no flags saved,
 * no bounds compared.  Made while the program runs (nothing of it is
 * reachable before its key).  How many. */
unsigned gb_jit__learn_exits(struct gb_jit *j, unsigned nareas);
bool gb_jit__is_counting(const struct gb_jit *j);
/* What the twins counted: instructions, reads, writes (a difference may be
 * negative: counts taken back by gb_jit__unwind after they were taken). */
struct gb_jit_counts { int64_t insns, reads, writes; };
/* Area k's counts since its last take (gebpf's harvest: no reset, so no
 * race with the thread adding to them). */
void gb_jit__count_take(struct gb_jit *j, unsigned k, struct gb_jit_counts *out);
/* Add c to area k's counts (the thread stopped): a faulting instruction's
 * exec and the accesses it completed, after gb_jit__unwind took it back. */
void gb_jit__count_add(struct gb_jit *j, unsigned k, const struct gb_jit_counts *c);
void gb_jit__stats(const struct gb_jit *j, struct gb_jit_stats *s);

#endif
