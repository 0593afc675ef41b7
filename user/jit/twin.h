/* Private to user/jit: the counting twins' pieces (twin.c's pass makes
 * them, twin_block.c emits a block's twin, twin_link.c its ways out,
 * twin_map.c keeps the pc -> twin map; twin_unwind.c puts a thread stopped
 * in one back at an original boundary).  docs/trace.md "Counting after the
 * budget". */
#ifndef GB_JIT_TWIN_H
#define GB_JIT_TWIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decode/decode.h"
#include "jit/internal.h"

/* struct unit .tw of a U_TWIN unit (pc: the original instruction a thread
 * stopped there stands at; tb: the counts taken back then). */
enum tw_kind {
	TW_HEAD,     /* the block's adds (a: the flags dead, add form; else
		      * flag-free, rax in T_TWS over [o_flg, o_sahf1)); each
		      * add done at o_b (instructions), o_load (reads), o_commit
		      * (writes), 0 when the block has none.  At the block's
		      * start, or (the flags live there) before its first
		      * instruction where they are dead: pc that instruction,
		      * tb taken back once its add is done, tpre before */
	TW_INSN,     /* an instruction's copy (a jcc/jmp: to the twin of its
		      * target) */
	TW_LINK,     /* a jump to the twin of pc (the block's fall-through) */
	TW_CALL,     /* a direct call: rax in T_RAX over [o_b, o_load), rsp
		      * moved at o_insn, then the jump to tgt's twin */
	TW_LOOKUP,   /* ret / indirect jmp / call: rcx, rax, rdx saved at off
		      * + 9, 18, 27, the flags in T_FLG over [o_flg, o_sahf2),
		      * done at o_hit and o_rel (on at T_TGT) */
	TW_SYSCALL,  /* the system call; from o_insn on at tgt (after it) */
	TW_MISS,     /* a jump whose target has no twin, at pc: counted and
		      * logged (saves as a lookup's), then natively on */
	TW_FIX,      /* a loop's exit from a copy that counted iterations ahead
		      * (twin_block.c): tb taken off, flag-free, as TW_HEAD's
		      * adds */
	/* A REP string instruction's pieces (twin_rep.c), tb its iteration's
	 * counts (1, reads, writes): */
	TW_RPRE,     /* rcx times tb added (o_b, o_load, o_commit as a head's,
		      * rax in T_TWS over [o_flg, o_sahf1)), then to TW_RZERO or
		      * TW_REP */
	TW_RZERO,    /* rcx 0: one instruction added (at o_b), on at tgt */
	TW_REP,      /* the instruction (at the unit's start) */
	TW_RPOST,    /* at pc (after it): rcx times tb taken off (repe/repne) */
};

/* The map's flags (struct gb_jit .tf). */
enum { TW_F_TWIN = 1, TW_F_TOREC = 2, TW_F_NEW = 4 };

/* twin_block.c: can a twin run gi and count it (its reads and writes: the
 * lines its record would make), exactly?  Not: REP strings (twin_rep.c's),
 * gathers and sign-masked moves (counts vary), popf (TF), what raises a
 * signal by design. */
bool ns_twin_countable(const struct gb_insn *gi, unsigned *rd, unsigned *wr);
/* The twin of the block at pc (*f its kind: TW_F_TWIN, or TW_F_TOREC for
 * a to-recording entry), or 0; translate (ns_twins'): it translates the
 * recording block a to-recording entry enters, NULL: that may not. */
uint64_t ns_twin_block(struct gb_jit *j, uint64_t pc, gb_jit_fetch_fn fetch, void *ctx,
		       jit_block_fn translate, uint8_t *f);

/* twin_rep.c: can a twin run the REP string instruction gi, all its
 * iterations natively, and count them (an iteration's reads and writes)?
 * Its pieces, adding to counter set set, ending the twin block (0, or
 * -ENOMEM / the emitter's error). */
bool ns_twin_rep_countable(const struct gb_insn *gi, unsigned *rd, unsigned *wr);
int ns_twin_rep(struct gb_jit *j, const struct gb_insn *gi, unsigned set, unsigned rd, unsigned wr);

/* twin_map.c: the pc -> twin map (*f: its TW_F_* flags; 0: no twin), and
 * the pcs wanted by the next pass (-ENOMEM). */
uint64_t ns_twin_of(const struct gb_jit *j, uint64_t pc, uint8_t *f);
int ns_twin_put(struct gb_jit *j, uint64_t pc, uint64_t addr, uint8_t f);
int ns_twin_want_add(struct gb_jit *j, uint64_t pc);

/* twin_link.c: a twin's ways out: a jump (its rel32 at src) to the twin of
 * target, or out of the range (none yet: left to the pass, which resolves
 * it); the same jump emitted; a call's push of its original return
 * address; the lookup of a ret / indirect jmp / call; the stub of an
 * in-range target no twin can be made for (its address, or 0). */
void ns_twin_link_to(struct gb_jit *j, size_t src, uint64_t target);
void ns_twin_jump_to(struct gb_jit *j, uint64_t target);
void ns_twin_push_ret(struct gb_jit *j, struct unit *u, uint64_t ret);
void ns_twin_lookup(struct gb_jit *j, const struct gb_insn *gi, struct unit *u);
uint64_t ns_twin_miss_stub(struct gb_jit *j, uint64_t target);

#endif
