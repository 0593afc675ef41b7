/* Private to user/jit: the translator's state, shared by its files (jit.c
 * translates blocks of insn.c's instructions, locate.c maps cache
 * addresses back, ring.c reads and runs the record ring, lock.c and ibl.c
 * emit the stop-free mode's entries, exits and lookups).  The layout of
 * the data part is here. */
#ifndef GB_JIT_INTERNAL_H
#define GB_JIT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/grow.h"
#include "decode/plan.h"
#include "jit/emit.h"
#include "jit/jit.h"

enum ukind {
	U_HEAD, U_INSN, U_STUB, U_LINK,
	U_NS,        /* stop-free mode: a routine, an entry, an exit or a lookup
		      * (pc: the original instruction it performs, or 0 in a
		      * shared routine: the thread's T_RET slot says where) */
	U_REP,       /* stop-free mode: a REP string instruction's loop tail
		      * (rep.c): rcx counted down, then back to the block's head
		      * for the next iteration or on to tgt */
	U_CHECK,     /* stop-free mode: popf's TF check (popf.c; pc the popf):
		      * rcx in its save slot after off (from off if a), rax
		      * from o_b */
	U_TWIN,      /* counting mode: a piece of a counting twin (twin.c;
		      * tw: enum tw_kind) */
	U_POST,      /* --values: after an instruction's copy, its written
		      * registers and memory into its record (vals.c; pc the
		      * next instruction): a, b, c, d saved at off, o_b,
		      * o_c, o_d (d: rax for the flags, or GB_REG_NONE) */
};

/* A piece of the code region, in address order. */
struct unit {
	uint64_t off;          /* [off, end) in the code region */
	uint32_t end;
	uint8_t kind;
	uint8_t a, b;          /* U_INSN: the scratch registers (b: GB_REG_NONE if unused) */
	uint8_t words;         /* U_INSN: ring words it writes; U_STUB (emu): the
				* words of the instruction it stands for */
	bool emu;              /* U_STUB: gebpf performs the instruction at pc (a
				* call, ret or indirect jump) at the stop */
	uint8_t ns;            /* U_NS: enum gb_jit_ns_kind */
	bool owner_chk;        /* U_NS entry: begins with the owner check (owner.c) */
	uint32_t o_b, o_load;  /* U_INSN: after A's save, after B's save */
	uint32_t o_commit;     /* U_INSN: after the head's update */
	uint8_t c, d;          /* U_INSN (values): C, after its save o_c; U_POST: see there */
	uint32_t o_c, o_d;
	uint32_t o_pre, o_pre_end; /* U_INSN (values): the reads' values taken (a fault
				* there is the instruction's) */
	uint32_t o_insn;       /* U_INSN: the instruction's copy; U_STUB: after the syscall;
				* U_NS lookup: its in-range miss stop (after the syscall) */
	uint32_t o_retry;      /* U_NS lookup: where gebpf resumes it after a miss stop */
	uint32_t id;           /* U_INSN: instruction id */
	/* U_REP: a (enum rep_cond) the condition of repe/repne, o_insn the
	 * jrcxz after rcx's decrement, tgt the next instruction. */
	/* U_NS lookup (unwind.c): the flags in T_FLG over [o_flg, o_sahf1) and
	 * [o_out, o_sahf2); the hit's final jmp; the out path's release.
	 * U_NS exit of a direct call: o_insn after its push, tgt its target;
	 * U_NS lookup of a ret: tgt the bytes it pops.
	 * U_NS native (reloc.h's pieces): tgt the bytes its rsp is below
	 * the original's (a call's push done, its jump not). */
	uint32_t o_flg, o_sahf1, o_out, o_sahf2, o_hit, o_rel;
	/* U_NS ring budget exit (ring.c): its 8-byte way slot (0 until
	 * gb_jit__ways fills it) */
	uint32_t o_way;
	uint64_t tgt;
	/* U_TWIN: the counts its block's head added that a thread stopped
	 * here has not run yet (exec, reads, writes: taken back from its
	 * area when it is put at pc; negative before a head placed inside the
	 * block: what it ran and no add has counted), tpre a TW_HEAD's before
	 * its add is done, and the piece's kind (twin.h) */
	int16_t tb[3], tpre[3];
	uint8_t tw;
	uint64_t pc;           /* U_HEAD: block; U_INSN: instruction; U_STUB/U_LINK: target */
};

struct ref {
	int64_t disp;
	uint32_t size;
	uint8_t flags;
	bool rt;               /* address recorded at run time */
};

struct insn {
	uint64_t pc;
	uint8_t len, nrefs;
	uint8_t bt_bits;       /* bt* [mem], reg: its operand bits (the record's
				* first address word is the register: the bit
				* offset, which moves every access by whole units) */
	uint8_t bytes[GB_INSN_MAX_LEN];
	struct ref refs[6];
	/* A gather or a sign-masked access (VSIB or MASKED plan, no opmask):
	 * after the address words the record holds ibytes of the index vector
	 * (VSIB) and mbytes of the mask vector, rounded up to 16 or 32; the
	 * consumer finds the active elements (one access each, element order). */
	uint8_t vkind;         /* GB_PLAN_VSIB, GB_PLAN_MASKED, GB_PLAN_COMPRESS or 0 */
	uint8_t nelem, elem, idx_elem, scale, ibytes, mbytes;
	/* An AVX-512 opmask-masked access (MASKED or COMPRESS plan, kreg set):
	 * after the address word the record holds the opmask's value, read
	 * before the instruction runs (gb_plan_kmask_elems turns it into the
	 * active elements); kmap and lanes as the plan's. */
	uint8_t kreg, kmap, lanes;
	/* --values (vals.c): the record's words (all of them), where its
	 * values begin, and its done word (0: none, nothing is taken after
	 * the instruction); emu: gebpf performs it (its registers and writes
	 * are taken by gebpf, after). */
	uint8_t words, vat, vdone;
	bool emu;
};

struct stub {
	uint64_t target;
	uint32_t src;          /* rel32 field that jumps here, to re-point; UINT32_MAX: none */
};

/* A jump (mn) to the block at target, or to a stub for it. */
struct link { ZydisMnemonic mn; uint64_t target; uint32_t src; };

struct entry { uint64_t pc, addr; };

/* A call of a shared routine (lock.c's ns_call), for unwinding: [off,
 * o_jmp] saves rax, rcx (rcx saved from o_saved), stores the way back and
 * jumps; o_ret (the way back) reloads rcx then rax, done at o_end. */
struct nscall { uint32_t off, o_saved, o_ret, o_end; bool acq; };

/* Offsets of the shared routines' pieces (lock.c, ring.c). */
struct ns_offs {
	/* acquire: flags saved (fl), ticket taken (x1, in eax until tk), served
	 * (got), its marker committed (marked), flags back (sahf), the wait */
	uint32_t acq, acq_fl, x1, tk, got, marked, acq_sahf, acq_end;
	uint32_t acq_bail;   /* gebpf gone: the ticket given up, on to T_BAIL */
	/* release: the next ticket served (xr); when its word is not 0: flags
	 * saved (rel_fl), the word taken (xs: eax 2, given up), rel_9 (rcx 1:
	 * given up), flags back (rel_sahf), on to serve the next (rel_next) or
	 * back (rel_ret2) */
	uint32_t rel, xr, rel_fl, rel_xs, rel_9, rel_sahf, rel_next, rel_ret2, rel_end;
	uint32_t fsave[2], frest[2];   /* the two futex calls: saves, restores */
	uint32_t slow, slow_flg, slow_saved, slow_rest, slow_sahf, slow_end;
	uint32_t slow_way;   /* gone: every register and the flags from the area, then T_WAY */
};

/* A per-thread area (below: its slots) holds, from T_BLK to the area's end, a counter of its own for each of
 * the first NS_BSLOTS twins (twin_block.c): a head adds 1 to it (one
 * read-modify-write where the three counts took three), and gebpf's harvest
 * weighs it by the block's counts (struct gb_jit's bw). */
#define T_BLK     256
#define NS_BSLOTS ((GB_JIT_TLS_SIZE - T_BLK) / 8)

struct gb_jit {
	struct gb_jit_mem m;
	struct gb_emit em;
	uint64_t start, end;
	struct gb_jit_opts o;
	struct unit *u; size_t nu, ucap;
	struct insn *in; size_t nin, incap;
	struct stub *st; size_t nst, stcap;   /* stubs not yet linked to a block */
	uint64_t *hk, *hv; size_t hcap, hn;   /* block pc -> target address */
	uint64_t lo, hi;                      /* span of the translated bytes */
	struct gb_jit_stats stats;
	/* stop-free mode */
	uint64_t acq, rel, ring_slow;         /* the shared routines (target addresses) */
	uint64_t tbl;                         /* lookup table (target address, in the code region) */
	struct entry *en; size_t nen, encap;  /* entry blocks */
	uint64_t *want; size_t nwant, wantcap; /* return sites wanted as blocks */
	size_t ring_bytes;                    /* the ring's size */
	uint32_t max_words;                   /* ring words of the largest block */
	uint64_t woke;                        /* consumed at the last wake of the writer */
	struct gb_jit_waker *waker;           /* gb_jit__ring_waker's thread, or NULL */
	uint64_t fs[GB_JIT_TLS_COUNT];        /* each area's fs base (gb_jit__area_fs) */
	struct ns_offs ro;                    /* the shared routines */
	bool live_held;                       /* this process holds NS_LIVE (live.c) */
	struct nscall *cs; size_t ncs, cscap; /* every call of them, in address order */
	/* counting twins (twin.c), with gb_jit_opts.twins */
	uint64_t *tk, *tv; uint8_t *tf; size_t tcap, tn;  /* pc -> twin (tf: TW_F_*) */
	struct twlink *tl; size_t ntl, tlcap;  /* twin jumps waiting for their target's twin */
	struct twslot *ts; size_t nts, tscap;  /* acquire sites with a twin word */
	size_t nts_seen;                       /* ... looked at by a pass */
	uint64_t *twant; size_t ntwant, twantcap; /* pcs wanted as twins (a pass's work) */
	uint64_t cbase[GB_JIT_TLS_COUNT][3];   /* each area's counts harvested so far */
	unsigned tset;                         /* the set the next twin counts in */
	uint16_t bw[NS_BSLOTS][3];             /* each block counter's weights (T_BLK):
						* the counts of one add of 1 */
	unsigned nbs;                          /* block counters given out */
	bool tw_auto;                          /* twins made with each translation
						* (after the first gb_jit__twins: a
						* set-up translates its blocks first) */
};

/* A twin's jump (its rel32 at src) to the twin of target, made in the same
 * pass; an acquire site's 8-byte word (off) for the twin of pc. */
struct twlink { uint32_t src; uint64_t target; };
struct twslot { uint64_t pc; uint32_t off; };

/* Data part. */
#define SLOT(r)   ((uint64_t)(r) * 8)
#define HEAD      (GB_REG_COUNT * 8)
#define BUDGET    (HEAD + 8)
#define RING      GB_JIT_DATA_SLOTS
#define BLOCK_WORDS (GB_JIT_BLOCK_INSNS * 7)
/* --values: an instruction's value words at most (vals.c), and a block's. */
#define VALS_MAX_WORDS 40
#define VALS_BLOCK_WORDS (GB_JIT_BLOCK_INSNS * (7 + VALS_MAX_WORDS))

/* Stop-free mode: words of the data part (docs/trace.md "A trap without
 * stops"), all below RING. */
#define NS_TNEXT     256   /* u32: the lock's next ticket (ticket.c) */
#define NS_TSERV     260   /* u32: the ticket it serves */
#define NS_SEQ       264   /* ring: odd while the writer wraps (a seqlock) */
#define NS_BASE      272   /* ring: words written before the current pass */
#define NS_CONSUMED  280   /* ring: words the consumer has read (it writes this) */
#define NS_WAKE      288   /* ring: futex word the consumer waits on */
#define NS_WAITING   296   /* ring: the writer waits for the consumer (futex on NS_CONSUMED) */
#define NS_DROPPING  304   /* ring: 1 once the consumer did not come in time */
#define NS_DROPPED   312   /* ring: records not written since */
#define NS_TIMEOUT   320   /* struct timespec: the writer's wait for the consumer */
#define NS_HALF      336   /* budget (blocks) of half the ring */
#define NS_NEXT      344   /* budget (blocks) still to go in this pass after the current */
#define NS_KEPT      352   /* dropping: where the head was when it began */
#define NS_MISSES    360   /* in-range targets missed (a lookup, an exit stub) */
#define NS_END       368   /* ring: the address of its end */
#define NS_MAXB      376   /* ring: bytes of the largest block's words */
/* gebpf serves the cache (live.c): a process-shared robust pthread mutex
 * that gebpf's worker holds; its lock word's byte 3 is 0 while the worker
 * lives, FUTEX_OWNER_DIED's byte (0x40) once the kernel has seen it die, or
 * once gebpf let go of the cache itself (GB_JIT_LIVE_GONE). */
#define NS_LIVE      384   /* pthread_mutex_t (40 bytes): to 424 */
#define NS_GONE      (NS_LIVE + 3)   /* the byte the cache's code reads */
#define NS_LKTO      432   /* struct timespec: the acquire's sleep (a bound) */
#define NS_COUNT     448   /* byte: 1 counting mode (twin.c: acquire sites with a
			    * twin go there instead of taking the lock) */
#define NS_TMISSES   456   /* twins' in-range misses (lock xadd), logged at NS_TMISSLOG */
#define NS_HDR       GB_JIT_HDR_OFF   /* the header (jit.h struct gb_jit_hdr): to 1024 */
#define NS_TFBIT     1024  /* 256 bytes: b & 1 (popf.c's flag-free TF test) */
#define NS_SCRATCH   2048  /* dropping: where records go (one block) */
#define NS_TMISSLOG  3072  /* twins' last NS_TMISSLOG_N missed targets */
#define NS_TMISSLOG_N 128u
_Static_assert(NS_SCRATCH + 16 * 7 * 8 <= NS_TMISSLOG && NS_TMISSLOG + NS_TMISSLOG_N * 8 <= 4096,
	       "the twins' miss log's room");
/* The per-thread areas, at the end of the data part (their addresses are
 * the threads' gs bases). */
#define NS_TLS_BYTES (GB_JIT_TLS_COUNT * GB_JIT_TLS_SIZE)
#define NS_TLS       (GB_JIT_DATA_SIZE - NS_TLS_BYTES)
/* ... below them the last GB_JIT_MISS_LOG missed targets (index: the low
 * byte of NS_MISSES before it counted the miss) */
#define NS_MISSLOG   (NS_TLS - GB_JIT_MISS_LOG * 8)
_Static_assert(GB_JIT_MISS_LOG == 256, "the miss log's index is a byte (movzx)");
/* ... below it, per ticket t of the lock (ticket.c), word t % NS_TSLOTS:
 * 0, 1 (t's taker sleeps on the word, or is about to) or 2 (t given up:
 * its taker is gone; whoever serves it serves the next). */
#define NS_TSLOTS    65536u   /* the index is the ticket's low 16 bits (movzx) */
#define NS_TSLOT     (NS_MISSLOG - NS_TSLOTS * 4)
/* ... below them the lookup table's twin column (twin.c: the counting twin
 * of each slot's block, 0 none), read as the table's other columns are,
 * [rax*8 + disp32] (ns_twcol_disp), and the ring below it. */
#define NS_TWCOL     (NS_TSLOT - NS_TBL_ENTRIES * 8)
/* ... and one area's slots. */
#define T_RAX  0
#define T_RCX  8
#define T_RDX  16
#define T_RSI  24
#define T_RDI  32
#define T_R10  40
#define T_R11  48
#define T_RET  56    /* where a shared routine returns to */
#define T_TGT  64    /* a lookup's target */
#define T_DST  72    /* ... its translated block */
#define T_FLG  80    /* flags saved by lahf/seto */
#define T_BLKN 88    /* a block's record count (the ring's slow path) */
#define T_MARK 96    /* the area's stretch marker: NS_MARK | k (set at start) */
#define T_LFLG 104   /* flags saved by the lock's routines (lahf/seto) */
#define T_TICKET 112 /* the ticket taken (acquire) or now served (release) */
#define T_WADDR 120  /* the ticket's wait word (a futex call's address) */
#define T_NEGFS 128  /* minus its owner's key, its fs base or fs:0 (owner.c) */
#define T_WAY   240  /* a budget exit's way on, natively, once gebpf is gone
		      * (ring.c: the block's original code, or 0) */
#define T_BAIL  136  /* an acquire's way on without the lock once gebpf is
		      * gone (the site's: its entry block again, or the
		      * original code after a system call), or 0: wait on */
/* Counting mode (twin.c): the thread's counts, in NS_CSETS sets (only its
 * own twins add to them; gebpf harvests the differences of their sums):
 * consecutive blocks, and the copies of a block that loops to itself, add
 * to different sets, so that no one counter's chain of read-modify-writes
 * through memory holds a tight loop up; a register's save in a twin's
 * flag-free head, and an acquire site's jump to its twin. */
#define T_CSET(s) (144 + 24 * (s))   /* instructions, reads, writes */
#define NS_CSETS  3
/* (T_BLK, NS_BSLOTS: a twin's block counter, above) */
#define T_TWS  216   /* rax in a twin head's flag-free adds */
#define T_TWJ  224   /* the twin an acquire site jumps to */
#define T_EXIT 232   /* the last target a twin's lookup left the range for */
_Static_assert(T_CSET(NS_CSETS) <= T_TWS && T_EXIT + 8 <= T_WAY && T_WAY + 8 <= GB_JIT_TLS_SIZE,
	       "the area's room");
_Static_assert(T_BAIL + 8 <= T_CSET(0), "the area's slots apart");
_Static_assert(T_WAY + 8 <= T_BLK && NS_BSLOTS >= 256, "the block counters' room");
/* A stretch marker's ring word: instruction ids are below it. */
#define NS_MARK   0x8000000000000000ull
#define NS_MARK_K 0xffffull
/* The lookup table: 64 Ki entries, negated keys then targets, 512 KiB-aligned
 * at the top of the code region (the twins' column: NS_TWCOL, in the data
 * part). */
#define NS_TBL_ENTRIES 65536u
#define NS_TBL_BYTES   (2 * NS_TBL_ENTRIES * 8)
/* A block whose home slot (the low 16 bits) is taken goes in one of the
 * next NS_TBL_PROBES slots, where a lookup's miss path looks (ibl.c). */
#define NS_TBL_PROBES  7u

static inline uint64_t *dword(const struct gb_jit *j, size_t off) { return (uint64_t *)(j->m.data + off); }
static inline uint64_t daddr(const struct gb_jit *j, size_t off) { return j->m.data_addr + off; }
static inline bool inside(const struct gb_jit *j, uint64_t pc) { return pc >= j->start && pc <= j->end; }

/* block_map.c: the translated block of pc, or 0; the block of pc is at
 * addr from now on (0, or -ENOMEM). */
uint64_t jit_block_of(const struct gb_jit *j, uint64_t pc);
int jit_block_put(struct gb_jit *j, uint64_t pc, uint64_t addr);

/* A unit of the code region, begun at its current end and ended there
 * later (every file that emits code marks its pieces so). */
static inline struct unit *jit_unit_add(struct gb_jit *j, enum ukind k, uint64_t pc)
{
	if (GB_GROW(&j->u, &j->ucap, j->nu + 1))
		return NULL;
	struct unit *u = &j->u[j->nu++];
	memset(u, 0, sizeof(*u));
	u->kind = (uint8_t)k;
	u->pc = pc;
	u->off = (uint32_t)j->em.used;
	return u;
}
static inline void jit_unit_end(struct gb_jit *j, struct unit *u) { u->end = (uint32_t)j->em.used; }

/* insn.c: one translated instruction's pieces (jit.c's blocks, popf.c,
 * rep.c).  The instrumentation of gi (its record: id, then each run-time address;
 * norefs: the id alone), a U_INSN unit whose end is the caller's (after
 * the copy of the instruction).  Its id, or -1. */
int jit_one(struct gb_jit *j, const struct gb_insn *gi, bool norefs);
#define ENTER_LEVELS 3   /* enter N, L: translated for L <= 3 */
/* vals.c (--values, gb_jit_opts.values): can gi's values be taken in the
 * cache; its value words (0: none); the reads' values taken after the
 * record's commit (A at the record's end, B and C scratch: jit_one); the
 * part after its copy (a U_POST unit, when it has one). */
bool jit_vals_ok(const struct gb_insn *gi);
unsigned jit_vals_words(const struct gb_insn *gi);
bool jit_vals_has_post(const struct gb_insn *gi);   /* (the done word is the record's last) */
void jit_vals_pre(struct gb_jit *j, const struct gb_insn *gi, const struct insn *in, unsigned a,
		  unsigned b, unsigned c);
void jit_vals_post(struct gb_jit *j, const struct gb_insn *gi, const struct insn *in);
/* An exit stub to target (getpid; in the stop-free mode then the lock is
 * released): see insn.c. */
uint64_t jit_stub(struct gb_jit *j, uint64_t target, uint32_t src, uint8_t emu_words);

/* lock.c: the shared routines (emitted at the start of the code after each
 * flush), and the sequences that call them. */
void ns_routines(struct gb_jit *j);
/* ticket.c: the acquire and release routines (j->acq, j->rel, j->ro). */
void ns_lock_routines(struct gb_jit *j);
/* bail: where its thread goes on without the lock once gebpf is gone (the
 * lock's wait gives its ticket up, rax, rcx and the flags back), or 0. */
void ns_acquire(struct gb_jit *j, uint64_t bail);
/* ... and, with gb_jit_opts.twins, in counting mode on to the twin of pc
 * once the twin pass has made it (twin.c: the site's word), else as above. */
void ns_acquire_tw(struct gb_jit *j, uint64_t bail, uint64_t pc);
void ns_release(struct gb_jit *j);
/* Release the lock and jump to target (an exit out of the range). */
void ns_leave(struct gb_jit *j, uint64_t target);
/* The system call instruction gi (recorded already), made without the lock. */
void ns_syscall(struct gb_jit *j, const struct gb_insn *gi);
/* The entry block for pc, whose patch is len bytes: take the lock, jump to
 * blk (its translation); its target address, or 0. */
uint64_t ns_entry_block(struct gb_jit *j, uint64_t pc, unsigned len, uint64_t blk,
			gb_jit_fetch_fn fetch, void *ctx);
void ns_areas_init(struct gb_jit *j);

/* live.c: the lock acquire's bounded sleep (NS_LKTO), set with the rest
 * of the data part. */
void ns_live_init(struct gb_jit *j);
/* movzx ecx, byte [NS_GONE] (NS_GONE_LEN bytes, flag-free): rcx 0 while
 * gebpf serves the cache. */
#define NS_GONE_LEN 7
void ns_gone_rcx(struct gb_jit *j);

/* owner.c: an entry block's owner check, emitted at the start of its unit
 * u when gb_jit_opts.owner_check and the instructions its patch of len
 * bytes covers at pc can run from a copy (reloc.h: in, their count
 * returned; 0: no check), and the copy a thread that is not the area's
 * owner runs (after the unit's end: to_native is the check's jump to it),
 * which goes on at the first instruction past the patch's bytes. */
unsigned ns_owner_check(struct gb_jit *j, struct unit *u, uint64_t pc, unsigned len,
			gb_jit_fetch_fn fetch, void *ctx, struct gb_insn in[5], size_t *to_native);
void ns_owner_native(struct gb_jit *j, const struct gb_insn *in, unsigned n, size_t to_native);
/* A stop at offset d of entry unit u: rax, rcx and rsp as at the entry
 * while it is in the check (0; -EFAULT: its stack not read), else 1. */
int ns_owner_unwind(const struct gb_jit *j, const struct unit *u, uint32_t d, uint64_t *rax,
		    uint64_t *rcx, uint64_t *rsp);

/* rep.c: REP string instructions in the stop-free mode (the ones
 * support.c takes), a block of their own whose every pass is one
 * iteration (its record, the instruction without its REP prefix, rcx
 * counted down, back to head). */
enum rep_cond { REP_ALWAYS, REP_WHILE_ZF, REP_WHILE_NZ };
/* gi's condition: repe/repne cmps and scas end early (twin_rep.c too). */
enum rep_cond ns_rep_cond(const struct gb_insn *gi);
/* After head (the block's budget check): 0, or -1. */
int ns_rep(struct gb_jit *j, const struct gb_insn *gi, uint64_t head);

/* popf.c: popf's TF check before its record (the thread leaves for the
 * original popf when the value it pops sets TF); the data part's table. */
bool ns_is_popf(const struct gb_insn *gi);
void ns_popf_check(struct gb_jit *j, const struct gb_insn *gi);
void ns_popf_table(struct gb_jit *j);

/* ibl.c */
/* Count a miss of the target in rcx and log it (the lock held; flags kept):
 * clobbers rax and t. */
void ns_log_miss(struct gb_jit *j, unsigned t);
void ns_table_clear(struct gb_jit *j);
void ns_table_put(struct gb_jit *j, uint64_t pc, uint64_t blk);
/* A call, ret or indirect jmp (gi, recorded already) in the stop-free mode.
 * A direct call to the range fills *l (a link to its target) and returns 1;
 * otherwise 0; -1 on an encoding error. */
int ns_transfer(struct gb_jit *j, const struct gb_insn *gi, struct link *l);

/* twin.c: counting twins (docs/trace.md "Counting after the budget").
 * The pass that makes the twins of every block (and wanted pc) that has
 * none, links them and publishes them (lookup table, acquire sites);
 * translate: gb_jit__block when the pass may translate recording blocks
 * (the lock held, or no thread in), else NULL (jit.c hands its translator
 * down, so the twins, which it drives, never call up into it). */
typedef uint64_t (*jit_block_fn)(struct gb_jit *j, uint64_t pc, gb_jit_fetch_fn fetch, void *ctx);
void ns_twins(struct gb_jit *j, gb_jit_fetch_fn fetch, void *ctx, jit_block_fn translate);
/* A block was translated at pc: the next pass makes its twin. */
void ns_twin_want(struct gb_jit *j, uint64_t pc);
/* twin_map.c: the map of twins emptied. */
void ns_twin_reset(struct gb_jit *j);
/* The published twin of pc for the lookup table's column (0: none). */
uint64_t ns_twin_pub(const struct gb_jit *j, uint64_t pc);
/* An acquire site's twin word at code offset off, for pc. */
void ns_twin_slot(struct gb_jit *j, uint64_t pc, uint32_t off);
/* A thread stopped at off of twin piece u: *pc where it goes on, its
 * registers fixed (r), the counts it has not run taken back from its area
 * (area: gebpf's view, writable); *keep_syscall as unwind.c's. */
struct user_regs_struct;
void ns_twin_unwind(struct gb_jit *j, const struct unit *u, uint32_t off,
		    struct user_regs_struct *r, uint8_t *area, uint64_t *pc, bool *keep_syscall);
/* twin_unwind.c: area k's counts 0 (a clone's child: not its parent's);
 * the twins' misses added to out (gb_jit__misses). */
void ns_count_area_new(struct gb_jit *j, unsigned k);
/* The block counters' counts moved into each area's sets, and the counters
 * given out again (a flush: the twins they weighed are gone). */
void ns_count_fold(struct gb_jit *j);
struct gb_jit_misses;
void ns_twin_misses(struct gb_jit *j, struct gb_jit_misses *out, bool clear);
/* probe chain of the lookup's miss path (ibl.c), from column col
 * (NS_TBL_ENTRIES * 8: targets, ns_twcol_disp: twins, where a 0 is not
 * found). */
void ns_probe_chain(struct gb_jit *j, uint64_t hit, int32_t col);
/* The twin column's displacement from the table (a lookup's [rax*8 + d]),
 * and gebpf's view of it. */
static inline int32_t ns_twcol_disp(const struct gb_jit *j)
{
	return (int32_t)(int64_t)(j->m.data_addr + NS_TWCOL - j->tbl);
}
static inline uint64_t *ns_twcol(const struct gb_jit *j) { return (uint64_t *)(j->m.data + NS_TWCOL); }
void ns_push_ret(struct gb_emit *m, uint64_t ret);

/* ring.c: the slow path (copied after the lock routines), and a block
 * head's exit to it when its budget is spent (stop-free mode). */
void ns_ring_routine(struct gb_jit *j);
void ns_budget_exit(struct gb_jit *j, uint32_t ninsns, uint64_t back, uint64_t pc);
/* A block writing words ring words was translated (the budgets count blocks
 * of the largest translated: called with the lock held or no thread in). */
void ns_ring_block(struct gb_jit *j, uint32_t words);
/* Is the last record of the ring's first used words (a record boundary)
 * a marker of area k?  Decoded from c's position when it is in this pass
 * (or NULL: from the pass's start). */
bool ns_ring_ends_with_mark(const struct gb_jit *j, const struct gb_jit_cursor *c, size_t used,
			    unsigned k);

#endif
