/* Control flow from instruction bytes, fast: length, call / direct branch
 * and its target, without operands or access plans (Zydis 4 in minimal
 * mode, about 4x faster than gb_decode()).  Used to scan whole modules for
 * branches into a range (user/sym/entries.c).  Knows nothing of ptrace. */
#ifndef GB_DECODE_FLOW_H
#define GB_DECODE_FLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gb_flow {
	uint8_t len;
	bool call;        /* any call (direct or indirect): the next insn is a return site */
	bool direct;      /* direct jmp / jcc / loop / jrcxz / call: target is valid */
	uint64_t target;  /* pc + len + displacement */
};

/* Decode the instruction at pc.  0, or -EINVAL when the bytes are not a
 * valid instruction (or n is too short for it). */
int gb_flow_decode(uint64_t pc, const uint8_t *bytes, size_t n, struct gb_flow *out);

/* Is addr an instruction boundary of the linear decode of code
 * [va, va + n) from va (a function's first byte)?  0 when an instruction
 * starts at addr (*prev = *next = addr); 1 when addr lies inside the
 * instruction at *prev, whose end *next is the next boundary; -EINVAL
 * when the bytes before addr do not decode (*prev: the undecodable
 * address).  addr must lie in [va, va + n). */
int gb_flow_boundary(uint64_t va, const uint8_t *p, size_t n, uint64_t addr, uint64_t *prev,
		     uint64_t *next);

/* Byte-level prefilter over code at va: call cb(ctx, src, target) for
 * every offset whose bytes read as a direct relative branch (E8, E9, EB,
 * 70-7F, E0-E3, 0F 80-8F, C7 F8: src is the opcode byte's address) with a
 * target inside [lo, hi].  Every real direct branch matches at its opcode
 * byte, so this finds a superset of them: confirm each hit with
 * gb_flow_decode() from an instruction boundary.  Stops at the first
 * non-zero return of cb and returns it; else 0. */
int gb_flow_scan(uint64_t va, const uint8_t *p, size_t n, uint64_t lo, uint64_t hi,
		 int (*cb)(void *ctx, uint64_t src, uint64_t target), void *ctx);

#endif
