/* The owner check's native path (user/jit/reloc.c): each form of branch
 * and call relocated from code at ORIG to a copy at COPY, the copy decoded
 * back with Zydis and followed: where each path goes, what a call pushes,
 * and where a thread stopped in each piece stands in original terms. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include <Zydis/Zydis.h>

#include "decode/decode.h"
#include "jit/emit.h"
#include "jit/jit.h"
#include "jit/reloc.h"
#include "jit_util.h"

#define ORIG 0x400000ull
#define COPY (ORIG + (256ull << 20))
#define ABS 14                       /* jmp qword [rip+0]; dq target */

static uint8_t buf[1024];
static struct gb_emit em;
static struct gb_insn in[8];
static unsigned nin;
static struct gb_reloc rl;

static bool ok(const uint8_t *b, size_t n, uint64_t copy)
{
	nin = (unsigned)jit_decode_all(ORIG, b, n, in, 8);
	return gb_reloc_ok(in, nin, copy, copy + GB_JIT_CODE_SIZE);
}

/* Relocate the instructions of b (at ORIG) to COPY. */
static void reloc(const uint8_t *b, size_t n)
{
	cr_assert(ok(b, n, COPY), "refused");
	memset(buf, 0xcc, sizeof(buf));
	em = (struct gb_emit){ .buf = buf, .base = COPY, .size = sizeof(buf) };
	cr_assert_eq(gb_reloc_emit(&em, in, nin, &rl), 0);
}

/* The copy's instruction at address a; *t its branch target or its memory
 * operand's address (absolute), if it has one. */
static ZydisDecodedInstruction insn_at(uint64_t a, ZydisDecodedOperand *ops, uint64_t *t)
{
	ZydisDecoder d;
	ZydisDecodedInstruction zi;
	ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	cr_assert(a >= COPY && a < COPY + em.used, "%#lx outside the copy", (unsigned long)a);
	cr_assert(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&d, buf + (a - COPY), em.used - (a - COPY), &zi,
						      ops)), "undecodable at +%#lx", (unsigned long)(a - COPY));
	*t = 0;
	for (unsigned k = 0; k < zi.operand_count_visible; k++) {
		ZyanU64 v;
		if ((ops[k].type == ZYDIS_OPERAND_TYPE_MEMORY ||
		     (ops[k].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ops[k].imm.is_relative)) &&
		    ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&zi, &ops[k], a, &v)))
			*t = v;
	}
	return zi;
}

static uint64_t qword(uint64_t a)
{
	uint64_t v;
	cr_assert(a >= COPY && a + 8 <= COPY + em.used, "%#lx: not the copy's", (unsigned long)a);
	memcpy(&v, buf + (a - COPY), 8);
	return v;
}

/* The absolute jump at a: its target. */
static uint64_t abs_jump(uint64_t a)
{
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	uint64_t m;
	ZydisDecodedInstruction zi = insn_at(a, ops, &m);
	cr_assert_eq(zi.mnemonic, ZYDIS_MNEMONIC_JMP, "+%#lx: not a jmp", (unsigned long)(a - COPY));
	cr_assert_eq(ops[0].type, ZYDIS_OPERAND_TYPE_MEMORY);
	cr_assert_eq(ops[0].mem.base, ZYDIS_REGISTER_RIP);
	cr_assert_eq(zi.length + 8, ABS);
	return qword(m);
}

/* Piece k: from the copy's offset off, at original pc (rsp rsp_up low). */
static void piece(unsigned k, uint32_t off, uint64_t pc, unsigned rsp_up)
{
	cr_assert_lt(k, rl.n);
	cr_assert_eq(rl.p[k].off, off, "piece %u at +%u, not +%u", k, rl.p[k].off, off);
	cr_assert_eq(rl.p[k].pc, pc, "piece %u at %#lx, not %#lx", k, (unsigned long)rl.p[k].pc,
		     (unsigned long)pc);
	cr_assert_eq(rl.p[k].rsp_up, rsp_up);
}

/* The copy ends at off with the jump to the original code after the
 * covered instructions (the last piece). */
static void ends(uint32_t off)
{
	uint64_t end = in[nin - 1].pc + in[nin - 1].len;
	piece(rl.n - 1, off, end, 0);
	cr_assert_eq(abs_jump(COPY + off), end);
	cr_assert_eq(em.used, off + ABS);
}

static const uint8_t NOP3[] = { 0x90, 0x90, 0x90 };

/* b then three nops (so that the patch's 5 bytes are covered). */
static void reloc_nops(const uint8_t *b, size_t n)
{
	uint8_t all[32];
	memcpy(all, b, n);
	memcpy(all + n, NOP3, sizeof(NOP3));
	reloc(all, n + sizeof(NOP3));
}

Test(jit_reloc, a_jmp_becomes_an_absolute_jump_to_its_original_target)
{
	static const uint8_t short_jmp[] = { 0xeb, 0x10 }, near_jmp[] = { 0xe9, 0x00, 0x01, 0x00, 0x00 };
	reloc_nops(short_jmp, sizeof(short_jmp));
	piece(0, 0, ORIG, 0);
	cr_assert_eq(abs_jump(COPY), ORIG + 2 + 0x10);
	piece(1, ABS, ORIG + 2, 0); /* (the nops after it: not reached) */
	ends(ABS + 3);
	reloc(near_jmp, sizeof(near_jmp));
	piece(0, 0, ORIG, 0);
	cr_assert_eq(abs_jump(COPY), ORIG + 5 + 0x100);
	ends(ABS);
}

static ZydisMnemonic mnemonic_of(const uint8_t *b, size_t n)
{
	struct gb_insn gi;
	cr_assert_eq(gb_decode(ORIG, b, n, &gi), 0);
	return gi.zi.mnemonic;
}

Test(jit_reloc, every_jcc_becomes_its_inverse_over_an_absolute_jump)
{
	for (unsigned cc = 0; cc < 16; cc++) {
		const uint8_t short_jcc[] = { (uint8_t)(0x70 | cc), 0x20 };
		const uint8_t near_jcc[] = { 0x0f, (uint8_t)(0x80 | cc), 0x00, 0x02, 0x00, 0x00 };
		const uint8_t inverse[] = { (uint8_t)(0x70 | (cc ^ 1)), 0x00 };
		for (int form = 0; form < 2; form++) {
			size_t len = form ? sizeof(near_jcc) : sizeof(short_jcc);
			uint64_t t = form ? ORIG + 6 + 0x200 : ORIG + 2 + 0x20;
			if (form)
				reloc(near_jcc, len);
			else
				reloc_nops(short_jcc, len);
			ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
			uint64_t skip;
			ZydisDecodedInstruction zi = insn_at(COPY, ops, &skip);
			cr_assert_eq(zi.mnemonic, mnemonic_of(inverse, 2), "cc %u: not inverted", cc);
			cr_assert_eq(zi.length, 2);
			cr_assert_eq(skip, COPY + 2 + ABS, "cc %u: not taken goes past the jump", cc);
			cr_assert_eq(abs_jump(COPY + 2), t, "cc %u: taken goes to its target", cc);
			piece(0, 0, ORIG, 0);
			piece(1, 2, t, 0); /* taken: at its target */
			if (form) {
				ends(2 + ABS);
			} else {
				piece(2, 2 + ABS, ORIG + 2, 0);
				ends(2 + ABS + 3);
			}
		}
	}
}

/* A push of the qword at its memory operand: that qword. */
static uint64_t pushed_at(uint64_t a)
{
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	uint64_t m;
	ZydisDecodedInstruction zi = insn_at(a, ops, &m);
	cr_assert_eq(zi.mnemonic, ZYDIS_MNEMONIC_PUSH);
	cr_assert_eq(ops[0].type, ZYDIS_OPERAND_TYPE_MEMORY);
	cr_assert_eq(ops[0].size, 64);
	return qword(m);
}

Test(jit_reloc, a_call_pushes_its_original_return_address_and_jumps_to_its_target)
{
	static const uint8_t call[] = { 0xe8, 0x00, 0x10, 0x00, 0x00 };
	reloc(call, sizeof(call));
	cr_assert_eq(pushed_at(COPY), ORIG + 5, "the return address is not the original one");
	cr_assert_eq(abs_jump(COPY + 6), ORIG + 5 + 0x1000);
	piece(0, 0, ORIG, 0);
	piece(1, 6, ORIG, 8); /* pushed, not jumped: the call again, rsp back up */
	ends(6 + ABS + 8);
}

Test(jit_reloc, an_indirect_call_pushes_its_original_return_address_and_jumps_through_its_operand)
{
	static const uint8_t call_rax[] = { 0xff, 0xd0 };                          /* call rax */
	static const uint8_t call_rsp8[] = { 0xff, 0x54, 0x24, 0x08, 0x90 };       /* call [rsp+8]; nop */
	static const uint8_t call_rip[] = { 0xff, 0x15, 0x00, 0x10, 0x00, 0x00 }; /* call [rip+0x1000] */
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	uint64_t m;
	reloc_nops(call_rax, sizeof(call_rax));
	cr_assert_eq(pushed_at(COPY), ORIG + 2);
	ZydisDecodedInstruction zi = insn_at(COPY + 6, ops, &m);
	cr_assert_eq(zi.mnemonic, ZYDIS_MNEMONIC_JMP);
	cr_assert_eq(ops[0].type, ZYDIS_OPERAND_TYPE_REGISTER);
	cr_assert_eq(ops[0].reg.value, ZYDIS_REGISTER_RAX);
	piece(1, 6, ORIG, 8);
	piece(2, 6 + zi.length + 8, ORIG + 2, 0);

	reloc(call_rsp8, sizeof(call_rsp8));
	cr_assert_eq(pushed_at(COPY), ORIG + 4);
	zi = insn_at(COPY + 6, ops, &m);
	cr_assert_eq(zi.mnemonic, ZYDIS_MNEMONIC_JMP);
	cr_assert_eq(ops[0].mem.base, ZYDIS_REGISTER_RSP);
	cr_assert_eq(ops[0].mem.disp.value, 16, "the operand as before the push");
	piece(2, 6 + zi.length + 8, ORIG + 4, 0);
	ends(6 + zi.length + 8 + 1);

	reloc(call_rip, sizeof(call_rip));
	cr_assert_eq(pushed_at(COPY), ORIG + 6);
	zi = insn_at(COPY + 6, ops, &m);
	cr_assert_eq(zi.mnemonic, ZYDIS_MNEMONIC_JMP);
	cr_assert_eq(m, ORIG + 6 + 0x1000, "the same pointer");
	ends(6 + zi.length + 8);
}

Test(jit_reloc, loop_and_jrcxz_keep_their_own_count_and_go_to_the_original_target)
{
	static const struct { uint8_t b[3]; uint8_t len; ZydisMnemonic mn; } f[] = {
		{ { 0xe2, 0xf0 }, 2, ZYDIS_MNEMONIC_LOOP },
		{ { 0xe1, 0xf0 }, 2, ZYDIS_MNEMONIC_LOOPE },
		{ { 0xe0, 0xf0 }, 2, ZYDIS_MNEMONIC_LOOPNE },
		{ { 0xe3, 0xf0 }, 2, ZYDIS_MNEMONIC_JRCXZ },
		{ { 0x67, 0xe3, 0xf0 }, 3, ZYDIS_MNEMONIC_JECXZ },
	};
	for (unsigned k = 0; k < sizeof(f) / sizeof(f[0]); k++) {
		unsigned l = f[k].len;
		uint64_t t = ORIG + l - 0x10;
		reloc_nops(f[k].b, l);
		ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
		uint64_t to;
		ZydisDecodedInstruction zi = insn_at(COPY, ops, &to);
		cr_assert_eq(zi.mnemonic, f[k].mn, "form %u", k);
		cr_assert_eq(zi.length, l);
		cr_assert_eq(to, COPY + l + 2, "form %u: taken goes to the jump to its target", k);
		zi = insn_at(COPY + l, ops, &to);
		cr_assert_eq(zi.mnemonic, ZYDIS_MNEMONIC_JMP);
		cr_assert_eq(to, COPY + l + 2 + ABS, "form %u: not taken goes on", k);
		cr_assert_eq(abs_jump(COPY + l + 2), t);
		piece(0, 0, ORIG, 0);
		piece(1, l, ORIG + l, 0);  /* done, not taken */
		piece(2, l + 2, t, 0);     /* done, taken */
		piece(3, l + 2 + ABS, ORIG + l, 0);
		ends(l + 2 + ABS + 3);
	}
}

Test(jit_reloc, a_target_among_the_covered_instructions_goes_to_its_copy)
{
	/* jz +1 (to the jnz), nop, jnz -5 (to the jz): their bytes are the patch */
	static const uint8_t b[] = { 0x74, 0x01, 0x90, 0x75, 0xfb };
	reloc(b, sizeof(b));
	cr_assert_eq(nin, 3);
	const uint32_t jz = 0, nop = 2 + ABS, jnz = nop + 1;
	piece(0, jz, ORIG, 0);
	piece(1, jz + 2, ORIG + 3, 0);
	piece(2, nop, ORIG + 2, 0);
	piece(3, jnz, ORIG + 3, 0);
	piece(4, jnz + 2, ORIG, 0);
	cr_assert_eq(abs_jump(COPY + jz + 2), COPY + jnz, "forward: the copy of the jnz");
	cr_assert_eq(abs_jump(COPY + jnz + 2), COPY + jz, "back: the copy of the jz");
	ends(jnz + 2 + ABS);
}

Test(jit_reloc, a_rip_relative_operand_still_reaches_the_same_bytes)
{
	static const uint8_t b[] = { 0x48, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00 }; /* mov rax, [rip+0x10] */
	reloc(b, sizeof(b));
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	uint64_t m;
	ZydisDecodedInstruction zi = insn_at(COPY, ops, &m);
	cr_assert_eq(zi.mnemonic, ZYDIS_MNEMONIC_MOV);
	cr_assert_eq(m, ORIG + 7 + 0x10);
	ends(zi.length);
}

Test(jit_reloc, what_cannot_run_from_a_copy_is_refused)
{
	static const uint8_t xbegin[] = { 0xc7, 0xf8, 0x00, 0x00, 0x00, 0x00 };
	static const uint8_t call_rsp[] = { 0xff, 0xd4, 0x90, 0x90, 0x90 };
	static const uint8_t call_far[] = { 0xff, 0x1c, 0x24, 0x90, 0x90 };       /* call far [rsp] */
	static const uint8_t call_fs[] = { 0x64, 0xff, 0x14, 0x25, 0x10, 0x00, 0x00, 0x00 };
	static const uint8_t eip_rel[] = { 0x67, 0x8b, 0x05, 0x00, 0x00, 0x00, 0x00 };
	static const uint8_t into_one[] = { 0xeb, 0x01, 0x48, 0x89, 0xc0 };      /* jmp into the mov */
	static const uint8_t far_data[] = { 0x8b, 0x05, 0x00, 0x00, 0x00, 0xa0 }; /* [rip-0x60000000] */
	cr_assert(!ok(xbegin, sizeof(xbegin), COPY));
	cr_assert(!ok(call_rsp, sizeof(call_rsp), COPY));
	cr_assert(!ok(call_far, sizeof(call_far), COPY));
	cr_assert(!ok(call_fs, sizeof(call_fs), COPY));
	cr_assert(!ok(eip_rel, sizeof(eip_rel), COPY));
	cr_assert(!ok(into_one, sizeof(into_one), COPY));
	cr_assert(ok(far_data, sizeof(far_data), COPY));
	cr_assert(!ok(far_data, sizeof(far_data), ORIG + (4ull << 30)), "data out of a rel32's reach");
}
