/* Private to user/decode: the access plan gb_decode() builds and
 * gb_insn_accesses() runs (struct gb_plan / struct gb_memref in decode.h).
 * docs/decoder.md explains each kind and the fix-up it carries. */
#ifndef GB_DECODE_PLAN_H
#define GB_DECODE_PLAN_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decode/decode.h"

enum gb_plan_kind {
	GB_PLAN_NONE = 0,  /* no memory access (incl. lea, prefetch, clflush, nop) */
	GB_PLAN_REFS,      /* the templates in .refs, in order */
	GB_PLAN_STRING,    /* .refs, but none when REP and the count register is 0 */
	GB_PLAN_BT,        /* refs[0] moved to the unit holding the bit (register offset) */
	GB_PLAN_ENTER,     /* enter N, L: computed from .level and the operand size */
	GB_PLAN_VSIB,      /* gather/scatter: refs[0] is base+disp, elements from .vreg */
	GB_PLAN_MASKED,    /* refs[0] filtered element by element by a mask */
	GB_PLAN_COMPRESS,  /* vpcompress/vpexpand: popcount(k) contiguous elements */
	GB_PLAN_XSAVE,     /* xsave family: size from CPUID 0xD, XCR0 and EDX:EAX */
};

/* Slots of struct gb_cpu's general registers. */
enum gb_reg {
	GB_REG_RAX, GB_REG_RBX, GB_REG_RCX, GB_REG_RDX,
	GB_REG_RSI, GB_REG_RDI, GB_REG_RBP, GB_REG_RSP,
	GB_REG_R8, GB_REG_R9, GB_REG_R10, GB_REG_R11,
	GB_REG_R12, GB_REG_R13, GB_REG_R14, GB_REG_R15,
	GB_REG_COUNT,
	GB_REG_NONE = 0xff,
};

enum gb_ref_flags {
	GB_REF_WRITE    = 1u << 0,
	GB_REF_ADDR32   = 1u << 1,  /* 0x67: the address wraps at 32 bits */
	GB_REF_FS       = 1u << 2,  /* add fs_base */
	GB_REF_GS       = 1u << 3,  /* add gs_base */
	GB_REF_INDEX_AL = 1u << 4,  /* xlat: the index is AL, zero-extended */
	GB_REF_XSAVE_C  = 1u << 5,  /* XSAVE plan: compacted format */
};

/* How mask lanes select memory elements in a GB_PLAN_MASKED plan. */
enum gb_mask_map {
	GB_MAP_DIRECT,     /* element j <- lane j (also scalar forms: element 0) */
	GB_MAP_GROUP,      /* element j <- lane j / (nelem / lanes) */
	GB_MAP_SPREAD,     /* element j <- any lane of j * (lanes / nelem) .. + lanes / nelem */
	GB_MAP_BCAST,      /* element j <- any lane i with i % nelem == j */
	GB_MAP_SIGN,       /* element j <- sign bit of element j of vector .vreg */
};

/* Fill insn->plan from insn->zi / insn->ops.  0 or -EINVAL. */
int gb_plan_build(struct gb_insn *insn);

/* The slot of the general register holding r (al, eax, rax: GB_REG_RAX),
 * or GB_REG_NONE. */
uint8_t gb_reg_slot(ZydisRegister r);

/* Read general register slot r of cpu. */
static inline uint64_t gb_cpu_reg(const struct gb_cpu *cpu, unsigned r)
{
	static const uint8_t off[GB_REG_COUNT] = {
		offsetof(struct gb_cpu, rax), offsetof(struct gb_cpu, rbx),
		offsetof(struct gb_cpu, rcx), offsetof(struct gb_cpu, rdx),
		offsetof(struct gb_cpu, rsi), offsetof(struct gb_cpu, rdi),
		offsetof(struct gb_cpu, rbp), offsetof(struct gb_cpu, rsp),
		offsetof(struct gb_cpu, r8),  offsetof(struct gb_cpu, r9),
		offsetof(struct gb_cpu, r10), offsetof(struct gb_cpu, r11),
		offsetof(struct gb_cpu, r12), offsetof(struct gb_cpu, r13),
		offsetof(struct gb_cpu, r14), offsetof(struct gb_cpu, r15),
	};
	return *(const uint64_t *)((const char *)cpu + off[r]);
}

/* Effective (linear) address of template r, with adj bytes added to the
 * offset before the address-size wrap. */
static inline uint64_t gb_ref_addr(const struct gb_memref *r, const struct gb_cpu *cpu,
				   int64_t adj)
{
	uint64_t a = (uint64_t)r->disp + (uint64_t)adj;

	if (r->base != GB_REG_NONE)
		a += gb_cpu_reg(cpu, r->base);
	if (r->index != GB_REG_NONE) {
		uint64_t i = gb_cpu_reg(cpu, r->index);
		if (r->flags & GB_REF_INDEX_AL)
			i &= 0xff;
		a += i * r->scale;
	}
	if (r->flags & GB_REF_ADDR32)
		a = (uint32_t)a;
	if (r->flags & GB_REF_FS)
		a += cpu->fs_base;
	else if (r->flags & GB_REF_GS)
		a += cpu->gs_base;
	return a;
}

/* Append one access to out[n]: the new count, or -ENOSPC. */
static inline int gb_emit(struct gb_access *out, int n, int max, uint64_t addr,
			  uint32_t size, bool write)
{
	if (n >= max)
		return -ENOSPC;
	out[n].addr = addr;
	out[n].size = size;
	out[n].write = write;
	return n + 1;
}

/* Vector-dependent plans (vector.c).  Same contract as gb_insn_accesses(). */
/* The memory elements an opmask value K selects in a MASKED plan that maps
 * its lanes from an opmask (not GB_MAP_SIGN): bit j set for element j; for
 * a COMPRESS plan, the low popcount(K & lanes) bits (its contiguous
 * elements).  What the stop-free translator records (the opmask word)
 * turns into accesses with this (user/jit/ring.c). */
uint64_t gb_plan_kmask_elems(const struct gb_plan *p, uint64_t k);

int gb_vec_accesses(const struct gb_insn *insn, const struct gb_cpu *cpu,
		    struct gb_access *out, int max);

/* Bytes an xsave-family instruction touches for requested-feature bitmap
 * rfbm (EDX:EAX, masked by XCR0 inside), standard or compacted (xsave.c). */
uint32_t gb_xsave_extent(uint64_t rfbm, int compacted);

#endif
