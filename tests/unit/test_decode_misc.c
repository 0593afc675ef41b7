/* Decoder tables, part 2: xlat, bit tests with register and immediate
 * offsets, x87 memory forms, instructions whose memory operand is not an
 * access (lea, prefetch, clflush, nop, bnd*), and instruction flags.
 * Also: invalid bytes, and a too-small output array. */
#include <errno.h>

#include "test_decode_util.h"

static struct dcase cases[] = {
	{ .name = "xlat rax=0x1234",
	  .bytes = { 0xd7 }, .len = 1,
	  .set = { SET(rax, 0x1234) },
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { R(RBX + 0x34, 1) },
	},
	{ .name = "xlat rax=0xffffffffffffffff",
	  .bytes = { 0xd7 }, .len = 1,
	  .set = { SET(rax, 0xffffffffffffffff) },
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { R(RBX + 0xff, 1) },
	},
	{ .name = "xlat byte ptr fs:[rbx] rax=0x10",
	  .bytes = { 0x64, 0xd7 }, .len = 2,
	  .set = { SET(rax, 0x10) },
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { R(FSBASE + RBX + 0x10, 1) },
	},
	{ .name = "bt [rbx], rcx rcx=100",
	  .bytes = { 0x48, 0x0f, 0xa3, 0x0b }, .len = 4,
	  .set = { SET(rcx, 100) },
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { R(RBX + 8, 8) },
	},
	{ .name = "bt dword ptr [rbx], ecx rcx=0xffffffff",
	  .bytes = { 0x0f, 0xa3, 0x0b }, .len = 3,
	  .set = { SET(rcx, 0xffffffff) },
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { R(RBX - 4, 4) },
	},
	{ .name = "bt dword ptr [rbx], ecx rcx=0x80000000",
	  .bytes = { 0x0f, 0xa3, 0x0b }, .len = 3,
	  .set = { SET(rcx, 0x80000000) },
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { R(RBX - 0x10000000, 4) },
	},
	{ .name = "bts qword ptr [rbx], rcx rcx=-65",
	  .bytes = { 0x48, 0x0f, 0xab, 0x0b }, .len = 4,
	  .set = { SET(rcx, -65) },
	  .flags = GB_INSN_MEM,
	  .n = 2, .exp = { R(RBX - 16, 8), W(RBX - 16, 8) },
	},
	{ .name = "btr word ptr [rbx], cx rcx=0x21",
	  .bytes = { 0x66, 0x0f, 0xb3, 0x0b }, .len = 4,
	  .set = { SET(rcx, 0x21) },
	  .flags = GB_INSN_MEM,
	  .n = 2, .exp = { R(RBX + 4, 2), W(RBX + 4, 2) },
	},
	{ .name = "btr word ptr [rbx], cx rcx=0xffff",
	  .bytes = { 0x66, 0x0f, 0xb3, 0x0b }, .len = 4,
	  .set = { SET(rcx, 0xffff) },
	  .flags = GB_INSN_MEM,
	  .n = 2, .exp = { R(RBX - 2, 2), W(RBX - 2, 2) },
	},
	{ .name = "btc [rbx], rcx rcx=63",
	  .bytes = { 0x48, 0x0f, 0xbb, 0x0b }, .len = 4,
	  .set = { SET(rcx, 63) },
	  .flags = GB_INSN_MEM,
	  .n = 2, .exp = { R(RBX, 8), W(RBX, 8) },
	},
	{ .name = "lock bts dword ptr [rbx], ecx rcx=32",
	  .bytes = { 0xf0, 0x0f, 0xab, 0x0b }, .len = 4,
	  .set = { SET(rcx, 32) },
	  .flags = GB_INSN_MEM,
	  .n = 2, .exp = { R(RBX + 4, 4), W(RBX + 4, 4) },
	},
	{ .name = "bt dword ptr [rbx], 40",
	  .bytes = { 0x0f, 0xba, 0x23, 0x28 }, .len = 4,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { R(RBX, 4) },
	},
	{ .name = "bts qword ptr [rbx], 70",
	  .bytes = { 0x48, 0x0f, 0xba, 0x2b, 0x46 }, .len = 5,
	  .flags = GB_INSN_MEM,
	  .n = 2, .exp = { R(RBX, 8), W(RBX, 8) },
	},
	{ .name = "fld tbyte ptr [rbx]",
	  .bytes = { 0xdb, 0x2b }, .len = 2,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { R(RBX, 10) },
	},
	{ .name = "fstp tbyte ptr [rbx]",
	  .bytes = { 0xdb, 0x3b }, .len = 2,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { W(RBX, 10) },
	},
	{ .name = "fld dword ptr [rbx]",
	  .bytes = { 0xd9, 0x03 }, .len = 2,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { R(RBX, 4) },
	},
	{ .name = "fld qword ptr [rbx]",
	  .bytes = { 0xdd, 0x03 }, .len = 2,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { R(RBX, 8) },
	},
	{ .name = "fst dword ptr [rbx]",
	  .bytes = { 0xd9, 0x13 }, .len = 2,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { W(RBX, 4) },
	},
	{ .name = "fstp qword ptr [rbx]",
	  .bytes = { 0xdd, 0x1b }, .len = 2,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { W(RBX, 8) },
	},
	{ .name = "fild word ptr [rbx]",
	  .bytes = { 0xdf, 0x03 }, .len = 2,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { R(RBX, 2) },
	},
	{ .name = "fistp qword ptr [rbx]",
	  .bytes = { 0xdf, 0x3b }, .len = 2,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { W(RBX, 8) },
	},
	{ .name = "fisttp dword ptr [rbx]",
	  .bytes = { 0xdb, 0x0b }, .len = 2,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { W(RBX, 4) },
	},
	{ .name = "fadd dword ptr [rbx]",
	  .bytes = { 0xd8, 0x03 }, .len = 2,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { R(RBX, 4) },
	},
	{ .name = "fbstp tbyte ptr [rbx]",
	  .bytes = { 0xdf, 0x33 }, .len = 2,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { W(RBX, 10) },
	},
	{ .name = "fnstcw word ptr [rbx]",
	  .bytes = { 0xd9, 0x3b }, .len = 2,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { W(RBX, 2) },
	},
	{ .name = "fldcw word ptr [rbx]",
	  .bytes = { 0xd9, 0x2b }, .len = 2,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { R(RBX, 2) },
	},
	{ .name = "fnstsw word ptr [rbx]",
	  .bytes = { 0xdd, 0x3b }, .len = 2,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { W(RBX, 2) },
	},
	{ .name = "fnstenv [rbx]",
	  .bytes = { 0xd9, 0x33 }, .len = 2,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { W(RBX, 28) },
	},
	{ .name = "fldenv [rbx]",
	  .bytes = { 0xd9, 0x23 }, .len = 2,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { R(RBX, 28) },
	},
	{ .name = "fnsave [rbx]",
	  .bytes = { 0xdd, 0x33 }, .len = 2,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { W(RBX, 108) },
	},
	{ .name = "frstor [rbx]",
	  .bytes = { 0xdd, 0x23 }, .len = 2,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { R(RBX, 108) },
	},
	{ .name = "fxsave [rbx]",
	  .bytes = { 0x0f, 0xae, 0x03 }, .len = 3,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { W(RBX, 512) },
	},
	{ .name = "fxrstor [rbx]",
	  .bytes = { 0x0f, 0xae, 0x0b }, .len = 3,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { R(RBX, 512) },
	},
	{ .name = "fxsave64 [rbx]",
	  .bytes = { 0x48, 0x0f, 0xae, 0x03 }, .len = 4,
	  .flags = GB_INSN_MEM,
	  .n = 1, .exp = { W(RBX, 512) },
	},
	{ .name = "lea rax, [rbx+rcx*8]",
	  .bytes = { 0x48, 0x8d, 0x04, 0xcb }, .len = 4,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "prefetcht0 [rbx]",
	  .bytes = { 0x0f, 0x18, 0x0b }, .len = 3,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "prefetchnta [rbx]",
	  .bytes = { 0x0f, 0x18, 0x03 }, .len = 3,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "prefetchw [rbx]",
	  .bytes = { 0x0f, 0x0d, 0x0b }, .len = 3,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "clflush [rbx]",
	  .bytes = { 0x0f, 0xae, 0x3b }, .len = 3,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "clflushopt [rbx]",
	  .bytes = { 0x66, 0x0f, 0xae, 0x3b }, .len = 4,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "clwb [rbx]",
	  .bytes = { 0x66, 0x0f, 0xae, 0x33 }, .len = 4,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "nop dword ptr [rax+rax]",
	  .bytes = { 0x0f, 0x1f, 0x04, 0x00 }, .len = 4,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "nop word ptr [rbx+rcx*2+0x100]",
	  .bytes = { 0x66, 0x0f, 0x1f, 0x84, 0x4b, 0x00, 0x01, 0x00, 0x00 }, .len = 9,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "endbr64",
	  .bytes = { 0xf3, 0x0f, 0x1e, 0xfa }, .len = 4,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "bndmov bnd0, [rbx]",
	  .bytes = { 0x66, 0x0f, 0x1a, 0x03 }, .len = 4,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "bndcl bnd0, [rbx]",
	  .bytes = { 0xf3, 0x0f, 0x1a, 0x03 }, .len = 4,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "bndstx [rbx], bnd0",
	  .bytes = { 0x0f, 0x1b, 0x03 }, .len = 3,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "nop",
	  .bytes = { 0x90 }, .len = 1,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "mov rax, rbx",
	  .bytes = { 0x48, 0x89, 0xd8 }, .len = 3,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "syscall",
	  .bytes = { 0x0f, 0x05 }, .len = 2,
	  .flags = GB_INSN_SYSCALL|GB_INSN_BRANCH,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "int 0x80",
	  .bytes = { 0xcd, 0x80 }, .len = 2,
	  .flags = GB_INSN_SYSCALL,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "sysenter",
	  .bytes = { 0x0f, 0x34 }, .len = 2,
	  .flags = GB_INSN_SYSCALL,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "cpuid",
	  .bytes = { 0x0f, 0xa2 }, .len = 2,
	  .flags = GB_INSN_CPUID,
	  .noflags = GB_INSN_MEM|GB_INSN_BRANCH,
	  .n = 0,
	},
	{ .name = "jz .+2",
	  .bytes = { 0x74, 0x00 }, .len = 2,
	  .flags = GB_INSN_BRANCH,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "jmp rax",
	  .bytes = { 0xff, 0xe0 }, .len = 2,
	  .flags = GB_INSN_BRANCH,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
	{ .name = "loop .+2",
	  .bytes = { 0xe2, 0x00 }, .len = 2,
	  .flags = GB_INSN_BRANCH,
	  .noflags = GB_INSN_MEM,
	  .n = 0,
	},
};

DCASE_TEST(decode_misc, forms, cases)

struct bad {
	uint8_t bytes[20];
	uint8_t len;
};

static struct bad bad_cases[] = {
	{ { 0x06 }, 1 },                          /* push es: invalid in 64-bit mode */
	{ { 0x48 }, 1 },                          /* REX prefix alone */
	{ { 0x0f, 0xff }, 2 },                    /* undefined opcode */
	{ { 0xf0, 0x90 }, 2 },                    /* lock nop */
	{ { 0x8b, 0x83, 0x78, 0x56 }, 4 },        /* mov eax, [rbx+disp32] cut short */
	{ { 0xc4 }, 1 },                          /* VEX prefix alone */
	{ { 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66,
	    0x66, 0x66, 0x66, 0x66, 0x66, 0x90 }, 16 },  /* 16 bytes: too long */
};

Test(decode_misc, invalid)
{
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad *b = &bad_cases[i];
		struct gb_insn in;
		cr_expect_eq(gb_decode(PC, b->bytes, b->len, &in), -EINVAL,
			     "bytes starting 0x%02x (%u bytes) should not decode", b->bytes[0], b->len);
	}
}

Test(decode_misc, empty_input)
{
	struct gb_insn in;
	uint8_t nop = 0x90;

	cr_assert_eq(gb_decode(PC, &nop, 0, &in), -EINVAL);
	cr_assert_eq(gb_decode(PC, &nop, 1, &in), 0);
	cr_assert_eq(in.len, 1);
}

Test(decode_misc, too_small_output)
{
	static const uint8_t add[] = { 0x48, 0x01, 0x03 };   /* add [rbx], rax */
	struct dcase c = { .use_vec = false };
	struct gb_insn in;
	struct gb_cpu cpu;
	struct gb_vec vec;
	struct gb_access acc[2];

	dcase_cpu(&c, &cpu, &vec);
	cr_assert_eq(gb_decode(PC, add, sizeof(add), &in), 0);
	cr_assert_eq(gb_insn_accesses(&in, &cpu, acc, 1), -ENOSPC);
	cr_assert_eq(gb_insn_accesses(&in, &cpu, acc, 2), 2);
	cr_assert(!acc[0].write && acc[1].write);
}

Test(decode_misc, decode_ignores_trailing_bytes)
{
	/* mov rax, [rbx] followed by the next instruction's bytes */
	static const uint8_t b[] = { 0x48, 0x8b, 0x03, 0xc3, 0xcc, 0xcc };
	struct gb_insn in;

	cr_assert_eq(gb_decode(0x1234, b, sizeof(b), &in), 0);
	cr_assert_eq(in.len, 3);
	cr_assert_eq(in.pc, 0x1234);
	cr_assert_eq(memcmp(in.bytes, b, 3), 0);
}

Test(decode_misc, format)
{
	static const uint8_t b[] = { 0x48, 0x8b, 0x03 };   /* mov rax, [rbx] */
	struct gb_insn in;
	char buf[96];

	cr_assert_eq(gb_decode(PC, b, sizeof(b), &in), 0);
	gb_insn_format(&in, buf, sizeof(buf));
	cr_assert_str_eq(buf, "mov rax, [rbx]");
	gb_insn_format(&in, buf, 5);
	cr_assert_eq(strlen(buf) < 5, 1);
}
