/* decode/written.h: the registers an instruction writes (trace --values),
 * by gdb's names, and the value text (record/numfmt.h gb_numfmt_hexle). */
#include <criterion/criterion.h>
#include <string.h>

#include "decode/decode.h"
#include "decode/written.h"
#include "record/numfmt.h"

/* The names of what bytes b write, comma-separated. */
static const char *written(const uint8_t *b, size_t n)
{
	static char out[512];
	struct gb_insn in;
	cr_assert_eq(gb_decode(0x401000, b, n, &in), 0);
	struct gb_wreg w[GB_WREG_MAX];
	int nw = gb_insn_written(&in, w, GB_WREG_MAX);
	out[0] = 0;
	for (int k = 0; k < nw; k++) {
		char name[16];
		gb_wreg_name(&w[k], name, sizeof(name));
		if (k)
			strcat(out, ",");
		strcat(out, name);
	}
	return out;
}

#define W(expect, ...) do { \
		const uint8_t b_[] = { __VA_ARGS__ }; \
		cr_expect_str_eq(written(b_, sizeof(b_)), expect); \
	} while (0)

Test(written, general_registers_by_their_whole_register)
{
	W("rax", 0xb8, 1, 0, 0, 0);                   /* mov eax, 1 */
	W("rax", 0xb0, 1);                            /* mov al, 1 */
	W("rax", 0xb4, 1);                            /* mov ah, 1 */
	W("r9", 0x4d, 0x89, 0xc1);                    /* mov r9, r8 */
	W("rax,eflags", 0x48, 0x01, 0xd8);            /* add rax, rbx */
	W("rsp", 0x55);                               /* push rbp */
	W("rbp,rsp", 0x5d);                           /* pop rbp */
	W("", 0x48, 0x89, 0x07);                      /* mov [rdi], rax */
	W("eflags", 0x48, 0x39, 0xd8);                /* cmp rax, rbx */
	W("rax,rdx,eflags", 0x48, 0xf7, 0xe3);        /* mul rbx */
	W("rax,rbx,rcx,rdx", 0x0f, 0xa2);             /* cpuid */
	W("rsp", 0xe8, 0, 0, 0, 0);                   /* call */
	W("", 0xeb, 0x00);                            /* jmp: rip is the next line's pc */
	W("rcx,rsi,rdi", 0xf3, 0xa4);                 /* rep movsb */
}

Test(written, syscall_and_segment_bases)
{
	W("rax,rcx,r11", 0x0f, 0x05);                 /* syscall */
	W("fs_base", 0xf3, 0x48, 0x0f, 0xae, 0xd0);   /* wrfsbase rax */
}

Test(written, vector_registers_at_the_operands_width)
{
	W("xmm0", 0x0f, 0x10, 0x06);                  /* movups xmm0, [rsi] */
	W("ymm4", 0xc5, 0xfe, 0x6f, 0x26);            /* vmovdqu ymm4, [rsi] */
	W("zmm1", 0x62, 0xf1, 0xfe, 0x48, 0x6f, 0x0e); /* vmovdqu32 zmm1, [rsi] */
	W("rax", 0x66, 0x48, 0x0f, 0x7e, 0xc0);       /* movq rax, xmm0 */
	W("mxcsr,xmm0", 0xf2, 0x0f, 0x58, 0xc1);      /* addsd xmm0, xmm1 */
	W("mxcsr,xmm0", 0x0f, 0x58, 0xc1);            /* addps xmm0, xmm1 */
	W("xmm0", 0x66, 0x0f, 0xfe, 0xc1);            /* paddd: no FP exceptions */
	W("mxcsr,ymm0", 0xc5, 0xf4, 0x58, 0xc2);      /* vaddps ymm0, ymm1, ymm2 */
}

Test(written, x87_stack_and_status)
{
	const char *all = "st0,st1,st2,st3,st4,st5,st6,st7,fstat";
	W(all, 0xd9, 0xfe);                           /* fsin */
	W(all, 0xd9, 0xf1);                           /* fyl2x: pops */
	W(all, 0xdd, 0xd8);                           /* fstp st0 */
	W(all, 0xd9, 0xe8);                           /* fld1: pushes */
	W("rax,fstat", 0xdf, 0xe0);                   /* fnstsw ax (C0-C3 undefined) */
	W("fctrl,fstat", 0xd9, 0x2e);                       /* fldcw [rsi] */
}

Test(written, whole_file_loads)
{
	const uint8_t b[] = { 0x0f, 0xae, 0x0e };     /* fxrstor [rsi] */
	struct gb_insn in;
	cr_assert_eq(gb_decode(0x401000, b, sizeof(b), &in), 0);
	cr_expect(gb_insn_writes_all(&in));
	const uint8_t c[] = { 0xc5, 0xf8, 0x77 };     /* vzeroupper */
	cr_assert_eq(gb_decode(0x401000, c, sizeof(c), &in), 0);
	cr_expect(gb_insn_writes_all(&in));
	const uint8_t d[] = { 0x90 };
	cr_assert_eq(gb_decode(0x401000, d, sizeof(d), &in), 0);
	cr_expect_not(gb_insn_writes_all(&in));
}

Test(written, names_parse_back)
{
	const char *names[] = { "rax", "r15", "rip", "eflags", "fs_base", "st7", "fstat",
				"mxcsr", "xmm31", "ymm0", "zmm17", "k7" };
	for (size_t k = 0; k < sizeof(names) / sizeof(*names); k++) {
		struct gb_wreg r;
		char back[16];
		cr_assert_eq(gb_wreg_parse(names[k], &r), 0, "%s", names[k]);
		gb_wreg_name(&r, back, sizeof(back));
		cr_expect_str_eq(back, names[k]);
	}
	struct gb_wreg r;
	cr_expect_eq(gb_wreg_parse("xmm32", &r), -1);
	cr_expect_eq(gb_wreg_parse("k8", &r), -1);
	cr_expect_eq(gb_wreg_parse("st", &r), -1);
	cr_expect_eq(gb_wreg_parse("rflags", &r), -1);
}

Test(written, value_text_is_one_little_endian_integer)
{
	char buf[200];
	const uint8_t a[] = { 0x34, 0x12, 0, 0 };
	buf[gb_numfmt_hexle(buf, a, sizeof(a))] = 0;
	cr_expect_str_eq(buf, "0x1234");
	const uint8_t z[8] = { 0 };
	buf[gb_numfmt_hexle(buf, z, sizeof(z))] = 0;
	cr_expect_str_eq(buf, "0x0");
	const uint8_t one[1] = { 0x0f };
	buf[gb_numfmt_hexle(buf, one, 1)] = 0;
	cr_expect_str_eq(buf, "0xf");
	uint8_t wide[16];
	for (int k = 0; k < 16; k++)
		wide[k] = (uint8_t)(k + 1);
	buf[gb_numfmt_hexle(buf, wide, sizeof(wide))] = 0;
	cr_expect_str_eq(buf, "0x100f0e0d0c0b0a090807060504030201");
	/* The same as gb_numfmt_hex for 8 bytes. */
	uint64_t v = 0x7fffffffe7a0;
	char ref[32];
	ref[gb_numfmt_hex(ref, v)] = 0;
	buf[gb_numfmt_hexle(buf, (const uint8_t *)&v, 8)] = 0;
	cr_expect_str_eq(buf, ref);
}
