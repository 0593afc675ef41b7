/* Private to user/jit: the instructions an entry's patch covers, relocated
 * to run natively from a copy in the code cache (owner.c's native path for
 * a thread that is not its area's owner; docs/trace.md "The patch trap").
 *
 * Each instruction keeps exactly its original effect on registers, flags,
 * memory and the stack, as DynamoRIO's and Frida's relocators do it:
 *
 *   other       copied (RIP-relative operands re-pointed: gb_emit_moved)
 *   jmp rel     jmp qword [rip+0]; dq target
 *   jcc rel     j!cc +14; jmp qword [rip+0]; dq target
 *   loop/jrcxz  (the same, rel8 2); jmp +14; jmp qword [rip+0]; dq target
 *   call rel    push qword [rip+14]; jmp qword [rip+0]; dq target; dq return
 *   call r/m    push qword [rip+L]; jmp r/m (L bytes: rsp-based +8); dq return
 *
 * and the copy ends with jmp qword [rip+0]; dq end (the original code after
 * the covered instructions).  A call pushes the ORIGINAL return address, so
 * the stack holds the program's own (no return address into the cache).  A
 * target among the covered instructions goes to its copy (their original
 * bytes are the patch).  The absolute jumps reach any target; nothing
 * touches a register, a flag or the cache's data. */
#ifndef GB_JIT_RELOC_H
#define GB_JIT_RELOC_H

#include <stdbool.h>
#include <stdint.h>

#include "decode/decode.h"
#include "jit/emit.h"

#define GB_RELOC_MAX 5                        /* instructions (a patch's 5 bytes) */
#define GB_RELOC_PIECES (3 * GB_RELOC_MAX + 1)

/* Where a thread stopped in the copy is in original terms: from off (the
 * emitter's m->used) to the next piece's off (the last: to the copy's end)
 * it stands at original instruction pc, with rsp rsp_up bytes below the
 * original's (a call's push done, its jump not: undone by adding it). */
struct gb_reloc_piece {
	uint32_t off;
	uint8_t rsp_up;
	uint64_t pc;
};

struct gb_reloc {
	struct gb_reloc_piece p[GB_RELOC_PIECES];
	unsigned n;
};

/* Can in[0..n) (consecutive instructions) run from a copy anywhere in
 * [lo, hi) (RIP-relative data within a rel32's reach of all of it)?  Not:
 * a far or non-64-bit branch, an xbegin, an EIP-relative operand, a branch
 * into the middle of one of them, call rsp. */
bool gb_reloc_ok(const struct gb_insn *in, unsigned n, uint64_t lo, uint64_t hi);
/* Emit the copy of in[0..n) (gb_reloc_ok) at m's current address; out its
 * pieces.  0, or m->err. */
int gb_reloc_emit(struct gb_emit *m, const struct gb_insn *in, unsigned n, struct gb_reloc *out);

#endif
