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
 * the slots, and never the stack.
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
};
#define GB_JIT_TLS_COUNT 256u       /* threads (areas at the end of the data part) */
#define GB_JIT_TLS_SIZE  128u
struct gb_jit *gb_jit__new_opts(const struct gb_jit_mem *m, uint64_t start, uint64_t end,
				const struct gb_jit_opts *o);
/* Target address of per-thread area k (a thread's gs base). */
uint64_t gb_jit__tls(const struct gb_jit *j, unsigned k);
/* Stop-free mode: the entry block of entry address pc (take the lock, then
 * the block at pc), translating what it needs; 0 as gb_jit__block. */
uint64_t gb_jit__entry(struct gb_jit *j, uint64_t pc, gb_jit_fetch_fn fetch, void *ctx);
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
/* The lock word (0 free, 1 held, 2 held with waiters). */
uint32_t gb_jit__lock_word(const struct gb_jit *j);
/* Release it from outside, as the release routine does (a thread that died
 * holding it; the futex is not private: gebpf's mapping of a shared cache
 * wakes the target's waiters). */
void gb_jit__lock_reset(struct gb_jit *j);
void gb_jit__free(struct gb_jit *j);

/* Can the instruction run translated?  (Otherwise the step engine runs it.) */
bool gb_jit__supported(const struct gb_insn *in);
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
/* Drop the last words written (a rolled-back instruction). */
void gb_jit__ring_unwrite(struct gb_jit *j, size_t words);

/* Stop-free mode, the consumer's side of the ring (while the program
 * runs): poll gives the next record (1), 0 when there is none yet; commit
 * tells the writer how far the consumer has read (the writer waits for it
 * at the end of each pass of the ring); wait sleeps until the writer says
 * the ring is half full, or ms. */
struct gb_jit_cursor { uint64_t base; size_t pos, limit; };
struct gb_jit_rec;
int gb_jit__ring_poll(struct gb_jit *j, struct gb_jit_cursor *c, uint64_t fs_base, uint64_t gs_base,
		      struct gb_jit_rec *out);
void gb_jit__ring_commit(struct gb_jit *j, const struct gb_jit_cursor *c);
int gb_jit__ring_wait(struct gb_jit *j, unsigned ms);
/* dropping: the writer gave up waiting (the consumer gone), the records
 * after the ring's last pass are not written, dropped counts them. */
struct gb_jit_ring_state { bool dropping; uint64_t dropped, consumed; };
void gb_jit__ring_state(const struct gb_jit *j, struct gb_jit_ring_state *st);

/* One instruction's record, decoded from the ring. */
struct gb_jit_rec {
	uint64_t pc;
	uint8_t len;
	int nacc;
	struct gb_access acc[6];
};
/* Decode the record at word *pos of the ring (advancing *pos): 1, 0 at the
 * end, -EINVAL when the ring holds garbage.  fs/gs: the thread's bases. */
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

struct gb_jit_stats { uint64_t blocks, insns, stubs, links, flushes, entries; };
void gb_jit__stats(const struct gb_jit *j, struct gb_jit_stats *s);

#endif
