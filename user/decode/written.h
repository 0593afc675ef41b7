/* The registers an instruction writes, for `trace --values`
 * (docs/trace-format.md "Values"): a pure function of its bytes, so both
 * engines and the QEMU plugin name the same registers for the same
 * instruction, and the names gdb gives them.
 *
 *   struct gb_wreg w[GB_WREG_MAX];
 *   int n = gb_insn_written(&insn, w, GB_WREG_MAX);
 *   for (k...) gb_wreg_name(&w[k], name, sizeof(name)), value: gb_wreg_bytes
 *   (trace/) or the QEMU plugin's register read.
 *
 * What counts as written: every register operand, explicit or implicit,
 * that Zydis says the instruction writes (conditionally too), a
 * general-purpose register named by its whole 64-bit register (a write to
 * eax shows rax), eflags when the instruction changes any status flag
 * (modified, set, cleared or left undefined), fstat for every x87
 * instruction that changes the stack or its condition codes, and the whole
 * stack (st0..st7, stack-relative: a push or pop renames them all) for one
 * that writes a stack register or pops; mxcsr for a SIMD floating-point
 * instruction (its exceptions set mxcsr's sticky flags); fs_base and
 * gs_base for wrfsbase and wrgsbase.  A syscall writes rax, rcx and r11.
 * Vector registers are named at the operand's width (xmm0 for a 128-bit
 * write, even where VEX also zeroes the upper bits).  rip is the next
 * exec line's pc, never listed. */
#ifndef GB_DECODE_WRITTEN_H
#define GB_DECODE_WRITTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decode/decode.h"

enum gb_wreg_kind {
	GB_WR_GPR,      /* num: enum gb_reg (rax, rbx, rcx, rdx, rsi, rdi, rbp, rsp, r8..r15) */
	GB_WR_RIP,      /* only in a whole register file (the regs line) */
	GB_WR_EFLAGS,
	GB_WR_FS_BASE,
	GB_WR_GS_BASE,
	GB_WR_ST,       /* st0..st7, 80 bits, stack order (st0: the top) */
	GB_WR_FCTRL,
	GB_WR_FSTAT,
	GB_WR_MXCSR,
	GB_WR_XMM,      /* xmm0..31 */
	GB_WR_YMM,      /* ymm0..31 */
	GB_WR_ZMM,      /* zmm0..31 */
	GB_WR_K,        /* k0..7 */
	GB_WR_KINDS,
};

struct gb_wreg {
	uint8_t kind;   /* enum gb_wreg_kind */
	uint8_t num;
};

/* More than any instruction writes (pushad-like forms do not exist in
 * 64-bit mode; vzeroall's 16 ymm registers are the most). */
#define GB_WREG_MAX 40

/* The registers insn writes, in the order of the register file
 * (gb_wreg_order), each once.  Returns the count (0..max). */
int gb_insn_written(const struct gb_insn *insn, struct gb_wreg *out, int max);
/* Does insn load the whole register file (xrstor, fxrstor, frstor, fninit,
 * fldenv, vzeroall, vzeroupper)?  It lists none of them: the regs line
 * before its thread's next instruction gives them all. */
bool gb_insn_writes_all(const struct gb_insn *insn);

/* gdb's name of r ("rax", "eflags", "st0", "xmm3", "k1"): its length. */
int gb_wreg_name(const struct gb_wreg *r, char *buf, size_t len);
/* r's size in bytes (st: 10). */
unsigned gb_wreg_size(const struct gb_wreg *r);
/* r's place in the register file: the order lines list registers in. */
unsigned gb_wreg_order(const struct gb_wreg *r);
/* r from gdb's name; 0, or -1 for a name that is not one. */
int gb_wreg_parse(const char *name, struct gb_wreg *r);

#endif
