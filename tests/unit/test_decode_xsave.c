/* xsave-family sizes.  Expectations come from the architecture (legacy
 * region + header = 576 bytes; AVX state at offset 576, 256 bytes) and from
 * CPUID leaf 0xD read here, and the last two tests ask the hardware: run
 * xsave/xsavec on a poisoned buffer and find the last byte written.
 * Tests needing XSAVE, AVX or AVX-512 state skip with a reason elsewhere. */
#include <cpuid.h>
#include <errno.h>
#include <stdlib.h>

#include "test_decode_util.h"

static bool have_osxsave(void)
{
	unsigned a, b, c, d;

	return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE);
}

static uint64_t xcr0(void)
{
	uint32_t lo, hi;

	if (!have_osxsave())
		return 0;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}

static bool have_xsavec(void)
{
	unsigned a, b, c, d;

	__cpuid_count(0xd, 1, a, b, c, d);
	return have_osxsave() && (a & 2);
}

#define XCR0_AVX    0x4ull
#define XCR0_AVX512 0xe0ull

/* One access of the xsave-family instruction b for EDX:EAX = rfbm. */
static struct gb_access xsave_access(const uint8_t *b, size_t n, uint64_t rfbm)
{
	struct dcase c = { .set = { SET(rax, rfbm & 0xffffffff), SET(rdx, rfbm >> 32) } };
	struct gb_insn in;
	struct gb_cpu cpu;
	struct gb_vec vec;
	struct gb_access acc[GB_MAX_ACCESSES];

	dcase_cpu(&c, &cpu, &vec);
	cr_assert_eq(gb_decode(PC, b, n, &in), 0);
	cr_assert(in.flags & GB_INSN_MEM);
	cr_assert_eq(gb_insn_accesses(&in, &cpu, acc, GB_MAX_ACCESSES), 1);
	cr_assert_eq(acc[0].addr, RBX);
	return acc[0];
}

static const uint8_t XSAVE[] = { 0x0f, 0xae, 0x23 };         /* xsave [rbx] */
static const uint8_t XSAVE64[] = { 0x48, 0x0f, 0xae, 0x23 }; /* xsave64 [rbx] */
static const uint8_t XSAVEOPT[] = { 0x0f, 0xae, 0x33 };      /* xsaveopt [rbx] */
static const uint8_t XSAVEC[] = { 0x0f, 0xc7, 0x23 };        /* xsavec [rbx] */
static const uint8_t XRSTOR[] = { 0x0f, 0xae, 0x2b };        /* xrstor [rbx] */

Test(decode_xsave, legacy_and_header)
{
	struct gb_access a;

	if (!have_osxsave())
		cr_skip_test("CPU or kernel without XSAVE (CPUID.1:ECX.OSXSAVE = 0)");
	a = xsave_access(XSAVE, sizeof(XSAVE), 3);
	cr_assert(a.write && a.size == 576, "xsave x87|SSE: %u bytes, write=%d", a.size, a.write);
	a = xsave_access(XSAVE, sizeof(XSAVE), 0);
	cr_assert(a.write && a.size == 576, "xsave with EDX:EAX = 0: %u bytes", a.size);
	a = xsave_access(XRSTOR, sizeof(XRSTOR), 3);
	cr_assert(!a.write && a.size == 576, "xrstor x87|SSE: %u bytes, write=%d", a.size, a.write);
}

Test(decode_xsave, avx)
{
	struct gb_access a;

	if (!(xcr0() & XCR0_AVX))
		cr_skip_test("XCR0 has no AVX state");
	a = xsave_access(XSAVE64, sizeof(XSAVE64), 7);
	cr_assert_eq(a.size, 576 + 256, "xsave64 x87|SSE|AVX: %u bytes", a.size);
	a = xsave_access(XSAVEC, sizeof(XSAVEC), 7);
	cr_assert_eq(a.size, 576 + 256, "xsavec x87|SSE|AVX: %u bytes", a.size);
}

Test(decode_xsave, all_enabled_matches_cpuid)
{
	unsigned a, b, c, d;
	struct gb_access acc;

	if (!have_osxsave())
		cr_skip_test("CPU or kernel without XSAVE");
	/* CPUID.(0xD,0).EBX: the standard-format size for every feature in XCR0. */
	__cpuid_count(0xd, 0, a, b, c, d);
	acc = xsave_access(XSAVEOPT, sizeof(XSAVEOPT), ~0ull);
	cr_assert(acc.write && acc.size == b, "xsaveopt all: %u bytes, CPUID says %u", acc.size, b);
	acc = xsave_access(XSAVE, sizeof(XSAVE), xcr0());
	cr_assert_eq(acc.size, b, "xsave XCR0: %u bytes, CPUID says %u", acc.size, b);
	acc = xsave_access(XRSTOR, sizeof(XRSTOR), ~0ull);
	cr_assert(!acc.write && acc.size == b, "xrstor all: %u bytes, CPUID says %u", acc.size, b);
}

Test(decode_xsave, avx512)
{
	unsigned a, b, c, d, a5, b5, c5, d5;
	struct gb_access acc;

	if ((xcr0() & XCR0_AVX512) != XCR0_AVX512)
		cr_skip_test("XCR0 has no AVX-512 state (opmask, ZMM_Hi256, Hi16_ZMM)");
	/* Standard format: Hi16_ZMM (component 7) ends the area for 0xe7. */
	__cpuid_count(0xd, 7, a, b, c, d);
	acc = xsave_access(XSAVE, sizeof(XSAVE), 0xe7);
	cr_assert_eq(acc.size, b + a, "xsave 0xe7: %u bytes, Hi16_ZMM ends at %u", acc.size, b + a);
	/* x87|SSE|opmask: standard keeps the opmask offset, compacted packs it. */
	__cpuid_count(0xd, 5, a5, b5, c5, d5);
	acc = xsave_access(XSAVE, sizeof(XSAVE), 0x23);
	cr_assert_eq(acc.size, b5 + a5, "xsave 0x23: %u bytes", acc.size);
	if (!have_xsavec())
		cr_skip_test("no XSAVEC (CPUID.(0xD,1):EAX[1] = 0)");
	if (c5 & 2)
		cr_skip_test("opmask state is 64-byte aligned when compacted on this CPU");
	acc = xsave_access(XSAVEC, sizeof(XSAVEC), 0x23);
	cr_assert_eq(acc.size, 576 + a5, "xsavec 0x23: %u bytes", acc.size);
}

/* Put every AVX/AVX-512 component in use with non-zero values, so that
 * xsave and xsavec write all of them (xsavec skips init-state ones). */
static void touch_vector_state(bool avx512)
{
	static const uint8_t ones[64] __attribute__((aligned(64))) = {
		[0 ... 63] = 0x11,
	};

	__asm__ volatile("vmovdqu %0, %%ymm15" : : "m"(*(const uint8_t(*)[32])ones) : "xmm15");
	/* zmm31 and k7: registers this file's code (built without -mavx512f)
	 * never uses, so they need no clobber (which gcc would reject). */
	if (avx512)
		__asm__ volatile("vmovdqu64 %0, %%zmm31\n\t"
				 "vmovdqu64 %0, %%zmm1\n\t"
				 "kxnorw %%k7, %%k7, %%k7"
				 : : "m"(*(const uint8_t(*)[64])ones) : "xmm1");
}

/* Last byte of buf[0..len) that differs from 0xaa, + 1. */
static size_t written_extent(const uint8_t *buf, size_t len)
{
	size_t end = 0;

	for (size_t i = 0; i < len; i++)
		if (buf[i] != 0xaa)
			end = i + 1;
	return end;
}

static void hardware_extent(bool compacted)
{
	const size_t len = 16384;
	uint64_t x = xcr0();
	bool avx512 = (x & XCR0_AVX512) == XCR0_AVX512;
	uint8_t *buf;
	struct gb_access acc;
	size_t hw;

	if (!(x & XCR0_AVX))
		cr_skip_test("XCR0 has no AVX state");
	if (x & ~(0x3ull | XCR0_AVX | XCR0_AVX512 | 0x200ull))
		cr_skip_test("XCR0 0x%llx has components this test cannot put in use",
			     (unsigned long long)x);
	if (compacted && !have_xsavec())
		cr_skip_test("no XSAVEC (CPUID.(0xD,1):EAX[1] = 0)");
	buf = aligned_alloc(64, len);
	cr_assert_not_null(buf);
	memset(buf, 0xaa, len);
	touch_vector_state(avx512);
	if (compacted)
		__asm__ volatile("xsavec (%0)" : : "r"(buf), "a"(~0u), "d"(~0u) : "memory");
	else
		__asm__ volatile("xsave (%0)" : : "r"(buf), "a"(~0u), "d"(~0u) : "memory");
	hw = written_extent(buf, len);
	acc = compacted ? xsave_access(XSAVEC, sizeof(XSAVEC), ~0ull)
			: xsave_access(XSAVE, sizeof(XSAVE), ~0ull);
	cr_assert_eq(acc.size, hw, "%s: decoder says %u bytes, the CPU wrote up to %zu",
		     compacted ? "xsavec" : "xsave", acc.size, hw);
	free(buf);
}

Test(decode_xsave, hardware_xsave)
{
	hardware_extent(false);
}

Test(decode_xsave, hardware_xsavec)
{
	hardware_extent(true);
}

/* The snapshot's XSAVE conversions (decode/xsave.h): an area saved by this
 * CPU (xsave, its own layout) goes to the standard layout with every
 * component at its architectural offset, and back to this CPU's layout
 * byte for byte, component by component. */
#include "decode/xsave.h"

static uint8_t hw_area[16384] __attribute__((aligned(64)));

Test(xsave_layout, round_trip_through_the_standard_layout)
{
	if (!have_osxsave() || !(xcr0() & XCR0_AVX))
		cr_skip_test("needs XSAVE with AVX enabled in XCR0");
	unsigned a, b, c, d;
	__cpuid_count(0xd, 0, a, b, c, d);
	size_t len = b;
	cr_assert(len >= GB_XSAVE_MIN && len <= sizeof(hw_area));
	memset(hw_area, 0, sizeof(hw_area));
	/* Non-init AVX state so XSTATE_BV has bit 2; the legacy region's XCR0
	 * bytes are where the kernel puts them in a ptrace area. */
	static const uint8_t pat[32] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
					 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32 };
	__asm__ volatile("vmovdqu %0, %%ymm7" : : "m"(pat) : "xmm7");
	uint64_t x = xcr0();
	__asm__ volatile("xsave %0" : "+m"(hw_area) : "a"((uint32_t)x), "d"((uint32_t)(x >> 32)));
	memcpy(hw_area + GB_XSAVE_XCR0, &x, 8);
	uint64_t bv;
	memcpy(&bv, hw_area + GB_XSAVE_HDR, 8);
	cr_assert(bv & XCR0_AVX, "xsave did not save the AVX state");

	size_t slen = len;
	uint8_t *std = gb_xsave_to_standard(hw_area, len, &slen);
	const uint8_t *s = std ? std : hw_area; /* NULL: already standard */
	/* ymm7's upper half: AVX component (2) at the standard 576 + 16*7. */
	cr_assert_arr_eq(s + 576 + 16 * 7, pat + 16, 16);
	cr_assert_arr_eq(s + 160 + 16 * 7, pat, 16);

	static uint8_t back[16384];
	memset(back, 0xcc, sizeof(back));
	memcpy(back + GB_XSAVE_XCR0, hw_area + GB_XSAVE_XCR0, 48);
	uint64_t lost = 1;
	cr_assert_eq(gb_xsave_from_standard(s, slen, back, len, &lost), 0);
	cr_assert_eq(lost, 0, "components lost: %#llx", (unsigned long long)lost);
	cr_assert_arr_eq(back, hw_area, GB_XSAVE_XCR0, "legacy region");
	uint64_t bv2;
	memcpy(&bv2, back + GB_XSAVE_HDR, 8);
	cr_assert_eq(bv2, bv & x);
	for (unsigned i = 2; i < 63; i++) {
		uint32_t off, size;
		if ((bv >> i) & 1 && gb_xsave_comp(i, &off, &size))
			cr_assert_arr_eq(back + off, hw_area + off, size, "component %u", i);
	}
	free(std);
}

Test(xsave_layout, components_this_cpu_lacks_are_reported)
{
	if (!have_osxsave())
		cr_skip_test("needs XSAVE");
	/* A standard area claiming a component no CPU enables in user mode
	 * here (MPX bound registers, 3: Linux never enables it for users). */
	static uint8_t std[2696], out[4096];
	memset(std, 0, sizeof(std));
	uint64_t bv = 3 | (1ull << 3);
	memcpy(std + GB_XSAVE_HDR, &bv, 8);
	uint64_t lost = 0;
	cr_assert_eq(gb_xsave_from_standard(std, sizeof(std), out, sizeof(out), &lost), 0);
	cr_assert_eq(lost, 1ull << 3);
	uint64_t got;
	memcpy(&got, out + GB_XSAVE_HDR, 8);
	cr_assert_eq(got, 3);
	cr_assert_eq(gb_xsave_from_standard(std, 100, out, sizeof(out), &lost), -1);
}
