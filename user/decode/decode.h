/* Instruction decoding: bytes + register state -> the instruction's memory
 * accesses, with hardware semantics (docs/trace-format.md, docs/decoder.md).
 *
 * Knows nothing of ptrace: callers fill struct gb_cpu themselves.  Built on
 * Zydis 4, with the fix-ups Zydis needs (implicit stack operands at the
 * decremented RSP, xlat's AL, fs/gs bases, VSIB elements, masked stores,
 * xsave sizes, non-accesses such as lea/prefetch/clflush/nop).
 *
 * Usage:
 *   struct gb_insn in;
 *   if (gb_decode(pc, bytes, n, &in) == 0) {
 *       if (in.flags & GB_INSN_NEEDS_VEC) fill cpu.vec;
 *       int n = gb_insn_accesses(&in, &cpu, acc, GB_MAX_ACCESSES);
 *   }
 * gb_decode() depends only on the bytes, so its result may be cached by PC.
 */
#ifndef GB_DECODE_DECODE_H
#define GB_DECODE_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <Zydis/Zydis.h>

#include "common/access.h"

#define GB_INSN_MAX_LEN 15
/* Enough for the longest list one instruction can give: a 64-element masked
 * byte operation (one access per active element, docs/decoder.md) or a
 * nested "enter N, 31" (62 accesses). */
#define GB_MAX_ACCESSES 72

/* Vector/mask state, needed only for VSIB and masked operations. */
struct gb_vec {
	uint8_t zmm[32][64];   /* zmm0..31 (xmm/ymm are the low 16/32 bytes) */
	uint64_t k[8];         /* AVX-512 opmask registers */
};

/* Register state before the instruction executes. */
struct gb_cpu {
	uint64_t rax, rbx, rcx, rdx, rsi, rdi, rbp, rsp;
	uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
	uint64_t rip, rflags, fs_base, gs_base;
	const struct gb_vec *vec;  /* NULL unless GB_INSN_NEEDS_VEC */
};

enum gb_insn_flags {
	GB_INSN_NEEDS_VEC   = 1u << 0, /* accesses depend on vector/mask registers */
	GB_INSN_SYSCALL     = 1u << 1, /* syscall / sysenter / int 0x80 */
	GB_INSN_PUSHF       = 1u << 2, /* pushes RFLAGS (the tracer must clear TF in the pushed copy) */
	GB_INSN_CPUID       = 1u << 3, /* cpuid (KVM may run one more insn when stepped) */
	GB_INSN_REP         = 1u << 4, /* REP/REPE/REPNE string instruction: one iteration per step */
	GB_INSN_BRANCH      = 1u << 5, /* may change RIP other than falling through */
	GB_INSN_MEM         = 1u << 6, /* has at least one memory access (possibly conditional) */
};

/* Private to user/decode: an effective-address template, resolved against a
 * struct gb_cpu by gb_insn_accesses() (base + index*scale + disp, truncated
 * to 32 bits for addr32, plus the fs/gs base).  RIP-relative operands are
 * folded into disp at decode time. */
struct gb_memref {
	int64_t disp;
	uint32_t size;     /* bytes */
	uint8_t base;      /* enum gb_reg slot, or GB_REG_NONE */
	uint8_t index;     /* enum gb_reg slot, or GB_REG_NONE (VSIB: in .plan) */
	uint8_t scale;
	uint8_t flags;     /* GB_REF_* */
};

/* Private to user/decode: how gb_insn_accesses() turns the templates into
 * accesses.  Everything that depends only on the bytes is decided here, at
 * decode time, so the per-step work is a few additions. */
struct gb_plan {
	uint8_t kind;      /* enum gb_plan_kind (plan.h) */
	uint8_t nrefs;
	uint8_t reg;       /* STRING: count register; BT: bit-offset register */
	uint8_t reg_bits;  /* STRING: count width (0 = no REP); BT: operand bits */
	uint8_t vreg;      /* VSIB: index vector number */
	uint8_t mreg;      /* GB_MAP_SIGN: mask vector number */
	uint8_t kreg;      /* opmask register number, 0 = none */
	uint8_t elem;      /* element size in bytes (memory side) */
	uint8_t idx_elem;  /* VSIB: index element size in bytes */
	uint8_t nelem;     /* VSIB: elements; MASKED: memory elements */
	uint8_t lanes;     /* MASKED: mask lanes */
	uint8_t map;       /* MASKED: enum gb_mask_map (plan.h) */
	uint8_t level;     /* ENTER: nesting level (0..31) */
	struct gb_memref refs[6];
};

struct gb_insn {
	uint64_t pc;
	uint8_t len;
	uint8_t bytes[GB_INSN_MAX_LEN];
	uint32_t flags;                  /* enum gb_insn_flags */
	struct gb_plan plan;             /* private to user/decode */
	ZydisDecodedInstruction zi;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
};


/* Decode the instruction at pc from up to n bytes.  0, or -EINVAL when the
 * bytes are not a valid instruction (or n is too short for it). */
int gb_decode(uint64_t pc, const uint8_t *bytes, size_t n, struct gb_insn *out);

/* The accesses the instruction performs from state cpu, in the order the
 * instruction performs them (reads before writes for read-modify-write).
 * Returns the count (0..max), or -ENOSPC if max is too small. */
int gb_insn_accesses(const struct gb_insn *insn, const struct gb_cpu *cpu,
		     struct gb_access *out, int max);

/* Is the instruction VEX-, EVEX- or XOP-encoded?  Linux's uprobes take the
 * opcode byte after such a prefix for a one-byte opcode and emulate that
 * instead of running the instruction out of line (EVEX vpbroadcastb's 0x7a
 * as jp, vmovdqu64's 0x7f as jg: the instruction never runs; measured on
 * 6.18, docs/bpf.md "What a uprobe runs"): no probe may sit on one. */
bool gb_insn_vex_family(const struct gb_insn *insn);

/* Mnemonic text for diagnostics ("mov qword ptr [rax], rbx"). */
void gb_insn_format(const struct gb_insn *insn, char *buf, size_t len);

#endif
