/* Private to user/jit: the counting twins' pieces (twin.c makes them,
 * twin_unwind.c puts a thread stopped in one back at an original
 * boundary).  docs/trace.md "Counting after the budget". */
#ifndef GB_JIT_TWIN_H
#define GB_JIT_TWIN_H

#include <stdbool.h>

#include "decode/decode.h"

/* struct unit .tw of a U_TWIN unit (pc: the original instruction a thread
 * stopped there stands at; tb: the counts taken back then). */
enum tw_kind {
	TW_HEAD,     /* the block's adds (a: the flags dead, add form; else
		      * flag-free, rax in T_TWS over [o_flg, o_sahf1)); each
		      * add done at o_b (instructions), o_load (reads), o_commit
		      * (writes), 0 when the block has none */
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
		      * (twin.c): tb taken off, flag-free, as TW_HEAD's adds */
};

/* The map's flags (struct gb_jit .tf). */
enum { TW_F_TWIN = 1, TW_F_TOREC = 2, TW_F_NEW = 4 };

/* Can a twin run gi and count it (its reads and writes: the lines its
 * record would make), exactly?  Not: REP strings, gathers and sign-masked
 * moves (counts vary), popf (TF), what raises a signal by design. */
bool ns_twin_countable(const struct gb_insn *gi, unsigned *rd, unsigned *wr);

#endif
