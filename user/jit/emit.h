/* Private to user/jit: encoding the few instruction forms the code cache
 * uses, with the Zydis encoder, at their run-time (target) address. */
#ifndef GB_JIT_EMIT_H
#define GB_JIT_EMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <Zydis/Zydis.h>

#include "decode/decode.h"

struct gb_emit {
	uint8_t *buf;        /* gebpf's view of the code */
	uint64_t base;       /* its target address */
	size_t size, used;
	int err;             /* sticky: -ENOSPC or -EINVAL */
};

static inline uint64_t gb_emit_here(const struct gb_emit *m) { return m->base + m->used; }

/* Is to within a rel32's reach (a little to spare) of all of [lo, hi]? */
static inline bool gb_emit_reach32(uint64_t lo, uint64_t hi, uint64_t to)
{
	int64_t a = (int64_t)(to - lo), b = (int64_t)(to - hi);
	return a > INT32_MIN + 16 && a < INT32_MAX - 16 && b > INT32_MIN + 16 && b < INT32_MAX - 16;
}

/* The Zydis register of enum gb_reg slot r (64-bit). */
ZydisRegister gb_emit_reg(unsigned r);

void gb_emit_store(struct gb_emit *m, uint64_t slot, unsigned r);        /* mov [slot], r */
void gb_emit_load(struct gb_emit *m, unsigned r, uint64_t slot);         /* mov r, [slot] */
void gb_emit_store_imm(struct gb_emit *m, unsigned base, int32_t disp, int32_t imm); /* mov qword [base+disp], imm */
void gb_emit_store_reg(struct gb_emit *m, unsigned base, int32_t disp, unsigned r);   /* mov [base+disp], r */
/* movdqu [base+disp], xmm v (bytes <= 16), else vmovdqu [base+disp], ymm v. */
void gb_emit_store_vec(struct gb_emit *m, unsigned base, int32_t disp, unsigned v, unsigned bytes);
/* r <- opmask k: kmovq r64, k (wide: AVX512BW's 64-bit opmasks), else
 * kmovw r32, k (AVX512F's 16, zero-extended). */
void gb_emit_kmov(struct gb_emit *m, unsigned r, unsigned k, bool wide);
/* lea r, [base + index*scale + disp] (GB_REG_NONE for no base / index). */
void gb_emit_lea(struct gb_emit *m, unsigned r, unsigned base, unsigned index, uint8_t scale,
		 int64_t disp);
void gb_emit_mov_imm32(struct gb_emit *m, unsigned r, uint32_t imm);     /* mov r32, imm */
void gb_emit_syscall(struct gb_emit *m);
/* jmp / jcc with a 32-bit displacement to target; returns the offset of the
 * rel32 field (for re-pointing it later). */
size_t gb_emit_jump(struct gb_emit *m, ZydisMnemonic mn, uint64_t target);
void gb_emit_jrcxz(struct gb_emit *m, uint64_t target);
void gb_emit_jmp8(struct gb_emit *m, uint64_t target);
/* Point the 2-byte jump (jrcxz, jmp8) at offset off to target (-EINVAL:
 * too far). */
void gb_emit_aim8(struct gb_emit *m, size_t off, uint64_t target);
/* The instruction in, moved to the current address (RIP-relative operands
 * re-encoded to reach the same bytes; others copied). */
void gb_emit_moved(struct gb_emit *m, const struct gb_insn *in);
/* The stop-free mode's forms (user/jit/lock.c, ibl.c). */
void gb_emit_raw(struct gb_emit *m, const uint8_t *bytes, size_t n);
void gb_emit_tls_store(struct gb_emit *m, int32_t off, unsigned r);      /* mov gs:[off], r */
void gb_emit_tls_load(struct gb_emit *m, unsigned r, int32_t off);       /* mov r, gs:[off] */
void gb_emit_tls_jmp(struct gb_emit *m, int32_t off);                    /* jmp qword gs:[off] */
void gb_emit_lea_rip(struct gb_emit *m, unsigned r, uint64_t addr);      /* lea r, [rip+addr] */
void gb_emit_mov_imm64(struct gb_emit *m, unsigned r, uint64_t imm);     /* mov r, imm64 */
void gb_emit_xchg32(struct gb_emit *m, uint64_t addr, unsigned r);       /* xchg [rip+addr], r32 */
/* mov r, <the target operand of call/jmp in> (a register or a memory
 * operand, RIP-relative ones re-encoded). */
void gb_emit_load_target(struct gb_emit *m, unsigned r, const struct gb_insn *in);
/* jmp <the same operand> (reloc.c: rsp-based ones rsp_up bytes further). */
void gb_emit_jmp_target(struct gb_emit *m, const struct gb_insn *in, int32_t rsp_up);
/* --values (vals.c): r <- size bytes at seg:[base+disp] (1 and 2
 * zero-extended, 4 into r's low half, 8); a store of vector register v at
 * its width (16, 32 or 64 bytes; EVEX where VEX cannot name it);
 * stmxcsr [base+disp]. */
enum { GB_EMIT_SEG_NONE, GB_EMIT_SEG_FS, GB_EMIT_SEG_GS };
void gb_emit_load_mem(struct gb_emit *m, unsigned r, unsigned base, int32_t disp, unsigned size,
		      unsigned seg);
void gb_emit_store_vreg(struct gb_emit *m, unsigned base, int32_t disp, unsigned v, unsigned bytes);
void gb_emit_stmxcsr(struct gb_emit *m, unsigned base, int32_t disp);
/* Re-point the rel32 field at offset off (ending at off + 4) to target. */
void gb_emit_repoint(struct gb_emit *m, size_t off, uint64_t target);

#endif
