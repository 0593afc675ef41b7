/* The AVX-512 masked-access rule, checked against the processor.
 *
 * For each form, the decoder's accesses for a mask are computed; the
 * instruction is then run with its memory operand placed so that the bytes
 * the decoder leaves out lie on a PROT_NONE page: (A) low lanes active, the
 * reported accesses ending at the page end; (B) high lanes active, starting
 * at the next page's start; (C) a mask the decoder says touches nothing,
 * with the whole operand on the guard page.  A fault means the processor
 * touched memory the decoder did not report (the forms it reads whole are
 * listed in user/decode/plan.c, evex_whole()).  Forms the CPU lacks
 * (SIGILL) are skipped and counted. */
#include <cpuid.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>

#include "test_decode_util.h"

struct hw_form {
	const char *name;
	uint8_t len;
	uint8_t b[15];
};

static const struct hw_form forms[] = {
	{ "vmovdqu32 zmm0{k1}, [rax]", 6, { 0x62, 0xf1, 0x7e, 0x49, 0x6f, 0x00 } },
	{ "vmovdqu8 zmm0{k1}, [rax]", 6, { 0x62, 0xf1, 0x7f, 0x49, 0x6f, 0x00 } },
	{ "vmovdqu16 [rax]{k1}, zmm0", 6, { 0x62, 0xf1, 0xff, 0x49, 0x7f, 0x00 } },
	{ "vmovups ymm0{k1}{z}, [rax]", 6, { 0x62, 0xf1, 0x7c, 0xa9, 0x10, 0x00 } },
	{ "vpaddd zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf1, 0x75, 0x49, 0xfe, 0x00 } },
	{ "vpaddb zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf1, 0x75, 0x49, 0xfc, 0x00 } },
	{ "vaddpd zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf1, 0xf5, 0x49, 0x58, 0x00 } },
	{ "vfmadd231ps zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0x75, 0x49, 0xb8, 0x00 } },
	{ "vpternlogd zmm0{k1}, zmm1, [rax], 0x96", 7, { 0x62, 0xf3, 0x75, 0x49, 0x25, 0x00, 0x96 } },
	{ "vpblendmd zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0x75, 0x49, 0x64, 0x00 } },
	{ "vpcmpeqd k2{k1}, zmm1, [rax]", 6, { 0x62, 0xf1, 0x75, 0x49, 0x76, 0x10 } },
	{ "vptestmd k2{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0x75, 0x49, 0x27, 0x10 } },
	{ "vfpclassps k2{k1}, zmmword ptr [rax], 1", 7, { 0x62, 0xf3, 0x7d, 0x49, 0x66, 0x10, 0x01 } },
	{ "vpmovzxbd zmm0{k1}, [rax]", 6, { 0x62, 0xf2, 0x7d, 0x49, 0x31, 0x00 } },
	{ "vpmovzxwq zmm0{k1}, [rax]", 6, { 0x62, 0xf2, 0x7d, 0x49, 0x34, 0x00 } },
	{ "vpmovsxdq zmm0{k1}, [rax]", 6, { 0x62, 0xf2, 0x7d, 0x49, 0x25, 0x00 } },
	{ "vcvtps2pd zmm0{k1}, [rax]", 6, { 0x62, 0xf1, 0x7c, 0x49, 0x5a, 0x00 } },
	{ "vcvtpd2ps ymm0{k1}, zmmword ptr [rax]", 6, { 0x62, 0xf1, 0xfd, 0x49, 0x5a, 0x00 } },
	{ "vcvtdq2pd zmm0{k1}, [rax]", 6, { 0x62, 0xf1, 0x7e, 0x49, 0xe6, 0x00 } },
	{ "vcvtph2ps zmm0{k1}, [rax]", 6, { 0x62, 0xf2, 0x7d, 0x49, 0x13, 0x00 } },
	{ "vcvtps2ph [rax]{k1}, zmm0, 0", 7, { 0x62, 0xf3, 0x7d, 0x49, 0x1d, 0x00, 0x00 } },
	{ "vpmovdb [rax]{k1}, zmm0", 6, { 0x62, 0xf2, 0x7e, 0x49, 0x31, 0x00 } },
	{ "vpmovqw [rax]{k1}, zmm0", 6, { 0x62, 0xf2, 0x7e, 0x49, 0x34, 0x00 } },
	{ "vpmovwb [rax]{k1}, zmm0", 6, { 0x62, 0xf2, 0x7e, 0x49, 0x30, 0x00 } },
	{ "vextracti32x4 [rax]{k1}, zmm0, 1", 7, { 0x62, 0xf3, 0x7d, 0x49, 0x39, 0x00, 0x01 } },
	{ "vinserti32x4 zmm0{k1}, zmm1, [rax], 2", 7, { 0x62, 0xf3, 0x75, 0x49, 0x38, 0x00, 0x02 } },
	{ "vinserti64x4 zmm0{k1}, zmm1, [rax], 1", 7, { 0x62, 0xf3, 0xf5, 0x49, 0x3a, 0x00, 0x01 } },
	{ "vbroadcasti32x4 zmm0{k1}, [rax]", 6, { 0x62, 0xf2, 0x7d, 0x49, 0x5a, 0x00 } },
	{ "vbroadcasti32x8 zmm0{k1}, [rax]", 6, { 0x62, 0xf2, 0x7d, 0x49, 0x5b, 0x00 } },
	{ "vbroadcasti64x2 zmm0{k1}, [rax]", 6, { 0x62, 0xf2, 0xfd, 0x49, 0x5a, 0x00 } },
	{ "vbroadcasti32x2 zmm0{k1}, qword ptr [rax]", 6, { 0x62, 0xf2, 0x7d, 0x49, 0x59, 0x00 } },
	{ "vpbroadcastd zmm0{k1}, dword ptr [rax]", 6, { 0x62, 0xf2, 0x7d, 0x49, 0x58, 0x00 } },
	{ "vpbroadcastb zmm0{k1}, byte ptr [rax]", 6, { 0x62, 0xf2, 0x7d, 0x49, 0x78, 0x00 } },
	{ "vaddps zmm0{k1}, zmm1, dword ptr [rax]{1to16}", 6, { 0x62, 0xf1, 0x74, 0x59, 0x58, 0x00 } },
	{ "vpdpbusd zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0x75, 0x49, 0x50, 0x00 } },
	{ "vpmaddwd zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf1, 0x75, 0x49, 0xf5, 0x00 } },
	{ "vpmaddubsw zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0x75, 0x49, 0x04, 0x00 } },
	{ "vpsllvd zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0x75, 0x49, 0x47, 0x00 } },
	{ "vpslld zmm0{k1}, zmm1, xmmword ptr [rax]", 6, { 0x62, 0xf1, 0x75, 0x49, 0xf2, 0x00 } },
	{ "vpslld zmm0{k1}, zmmword ptr [rax], 3", 7, { 0x62, 0xf1, 0x7d, 0x49, 0x72, 0x30, 0x03 } },
	{ "vpsrldq zmm0, zmmword ptr [rax], 3", 7, { 0x62, 0xf1, 0x7d, 0x48, 0x73, 0x18, 0x03 } },
	{ "vpermilps zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0x75, 0x49, 0x0c, 0x00 } },
	{ "vpermilps zmm0{k1}, zmmword ptr [rax], 0x1b", 7, { 0x62, 0xf3, 0x7d, 0x49, 0x04, 0x00, 0x1b } },
	{ "vmovsldup zmm0{k1}, [rax]", 6, { 0x62, 0xf1, 0x7e, 0x49, 0x12, 0x00 } },
	{ "vmovddup zmm0{k1}, [rax]", 6, { 0x62, 0xf1, 0xff, 0x49, 0x12, 0x00 } },
	{ "vmovddup xmm0{k1}, qword ptr [rax]", 6, { 0x62, 0xf1, 0xff, 0x09, 0x12, 0x00 } },
	{ "vpunpckldq zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf1, 0x75, 0x49, 0x62, 0x00 } },
	{ "vpackssdw zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf1, 0x75, 0x49, 0x6b, 0x00 } },
	{ "vshufi32x4 zmm0{k1}, zmm1, [rax], 0", 7, { 0x62, 0xf3, 0x75, 0x49, 0x43, 0x00, 0x00 } },
	{ "vgf2p8affineqb zmm0{k1}, zmm1, [rax], 0", 7, { 0x62, 0xf3, 0xf5, 0x49, 0xce, 0x00, 0x00 } },
	{ "vpmultishiftqb zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0xf5, 0x49, 0x83, 0x00 } },
	{ "vpshldvd zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0x75, 0x49, 0x71, 0x00 } },
	{ "vpopcntd zmm0{k1}, [rax]", 6, { 0x62, 0xf2, 0x7d, 0x49, 0x55, 0x00 } },
	{ "vpmadd52luq zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0xf5, 0x49, 0xb4, 0x00 } },
	{ "vdpbf16ps zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0x76, 0x49, 0x52, 0x00 } },
	{ "vcvtne2ps2bf16 zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0x77, 0x49, 0x72, 0x00 } },
	{ "vpexpandd zmm0{k1}, [rax]", 6, { 0x62, 0xf2, 0x7d, 0x49, 0x89, 0x00 } },
	{ "vpcompressd [rax]{k1}, zmm0", 6, { 0x62, 0xf2, 0x7d, 0x49, 0x8b, 0x00 } },
	{ "vmovss xmm0{k1}, dword ptr [rax]", 6, { 0x62, 0xf1, 0x7e, 0x09, 0x10, 0x00 } },
	{ "vaddsd xmm0{k1}, xmm1, qword ptr [rax]", 6, { 0x62, 0xf1, 0xf7, 0x09, 0x58, 0x00 } },
	{ "vgetexpps zmm0{k1}, [rax]", 6, { 0x62, 0xf2, 0x7d, 0x49, 0x42, 0x00 } },
	{ "vrangeps zmm0{k1}, zmm1, [rax], 0", 7, { 0x62, 0xf3, 0x75, 0x49, 0x50, 0x00, 0x00 } },
	{ "vpermd zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0x75, 0x49, 0x36, 0x00 } },
	{ "vpshufb zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0x75, 0x49, 0x00, 0x00 } },
	{ "vpshufd zmm0{k1}, [rax], 0", 7, { 0x62, 0xf1, 0x7d, 0x49, 0x70, 0x00, 0x00 } },
	{ "vpshufhw zmm0{k1}, [rax], 0", 7, { 0x62, 0xf1, 0x7e, 0x49, 0x70, 0x00, 0x00 } },
	{ "vshufps zmm0{k1}, zmm1, [rax], 0", 7, { 0x62, 0xf1, 0x74, 0x49, 0xc6, 0x00, 0x00 } },
	{ "vunpcklps zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf1, 0x74, 0x49, 0x14, 0x00 } },
	{ "vpconflictd zmm0{k1}, [rax]", 6, { 0x62, 0xf2, 0x7d, 0x49, 0xc4, 0x00 } },
	{ "valignd zmm0{k1}, zmm1, [rax], 1", 7, { 0x62, 0xf3, 0x75, 0x49, 0x03, 0x00, 0x01 } },
	{ "vpalignr zmm0{k1}, zmm1, [rax], 1", 7, { 0x62, 0xf3, 0x75, 0x49, 0x0f, 0x00, 0x01 } },
	{ "vdbpsadbw zmm0{k1}, zmm1, [rax], 0", 7, { 0x62, 0xf3, 0x75, 0x49, 0x42, 0x00, 0x00 } },
	{ "vpshufbitqmb k2{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0x75, 0x49, 0x8f, 0x10 } },
	{ "vpermt2d zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0x75, 0x49, 0x7e, 0x00 } },
	{ "vpermi2d zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0x75, 0x49, 0x76, 0x00 } },
	{ "vpermb zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0x75, 0x49, 0x8d, 0x00 } },
	{ "vpermq zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0xf5, 0x49, 0x36, 0x00 } },
	{ "vpermq zmm0{k1}, zmmword ptr [rax], 0", 7, { 0x62, 0xf3, 0xfd, 0x49, 0x00, 0x00, 0x00 } },
	{ "vinsertps xmm0, xmm1, dword ptr [rax], 0", 6, { 0xc4, 0xe3, 0x71, 0x21, 0x00, 0x00 } },
	{ "vpsrlq zmm0{k1}, zmm1, xmmword ptr [rax]", 6, { 0x62, 0xf1, 0xf5, 0x49, 0xd3, 0x00 } },
	{ "vpmovzxbq zmm0{k1}, qword ptr [rax]", 6, { 0x62, 0xf2, 0x7d, 0x49, 0x32, 0x00 } },
	{ "vcvtudq2pd zmm0{k1}, ymmword ptr [rax]", 6, { 0x62, 0xf1, 0x7e, 0x49, 0x7a, 0x00 } },
	{ "vpmovusqb [rax]{k1}, zmm0", 6, { 0x62, 0xf2, 0x7e, 0x49, 0x12, 0x00 } },
	{ "vmovdqu64 [rax]{k1}, ymm0", 6, { 0x62, 0xf1, 0xfe, 0x29, 0x7f, 0x00 } },
	{ "vscalefps zmm0{k1}, zmm1, [rax]", 6, { 0x62, 0xf2, 0x75, 0x49, 0x2c, 0x00 } },
	{ "vpsadbw zmm0, zmm1, [rax]", 6, { 0x62, 0xf1, 0x75, 0x48, 0xf6, 0x00 } },
	{ "vmovdqu16 xmm0{k1}, [rax]", 6, { 0x62, 0xf1, 0xff, 0x09, 0x6f, 0x00 } },
};

static sigjmp_buf hw_jmp;
static volatile int hw_sig;

static void hw_handler(int sig)
{
	hw_sig = sig;
	siglongjmp(hw_jmp, 1);
}

/* Run the form with RAX = m and k1 = k; the signal that stopped it, or 0. */
static int hw_run(uint8_t *code, const struct hw_form *f, uint64_t m, uint64_t k)
{
	uint8_t *p = code;

	*p++ = 0x48; *p++ = 0xb8; memcpy(p, &m, 8); p += 8;        /* movabs rax, m */
	*p++ = 0x48; *p++ = 0xb9; memcpy(p, &k, 8); p += 8;        /* movabs rcx, k */
	memcpy(p, "\xc4\xe1\xfb\x92\xc9", 5); p += 5;             /* kmovq k1, rcx */
	memcpy(p, f->b, f->len); p += f->len;
	*p = 0xc3;                                                 /* ret */
	hw_sig = 0;
	if (sigsetjmp(hw_jmp, 1) == 0)
		((void (*)(void))code)();
	return hw_sig;
}

static bool have_avx512(void)
{
	unsigned a, b, c, d;
	uint32_t lo, hi;

	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & (1u << 16)))
		return false;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
		return false;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (lo & 0xe0) == 0xe0;
}

Test(decode_hw, masked_accesses_match_the_cpu)
{
	const uint64_t base = 0x10000000;
	struct sigaction sa = { .sa_handler = hw_handler, .sa_flags = SA_NODEFER };
	uint8_t *code, *mem;
	uint64_t lo_page, hi_page;
	int ran = 0, skipped = 0, failed = 0;

	if (!have_avx512())
		cr_skip_test("no AVX-512F (or the kernel does not enable its state)");
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGILL, &sa, NULL);
	code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mem = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert(code != MAP_FAILED && mem != MAP_FAILED);
	cr_assert_eq(mprotect(mem, 4096, PROT_NONE), 0);
	cr_assert_eq(mprotect(mem + 2 * 4096, 4096, PROT_NONE), 0);
	lo_page = (uint64_t)(uintptr_t)mem + 4096;   /* the one accessible page */
	hi_page = lo_page + 4096;

	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		const struct hw_form *f = &forms[i];
		static struct gb_vec vec;
		struct gb_cpu cpu = { .rax = base, .vec = &vec };
		struct gb_access acc[GB_MAX_ACCESSES];
		struct gb_insn in;
		unsigned lanes;
		uint64_t all, ks[3];
		bool none_done = false;

		cr_assert_eq(gb_decode(PC, f->b, f->len, &in), 0, "%s: decode failed", f->name);
		lanes = in.plan.lanes ? in.plan.lanes : 16;
		all = lanes >= 64 ? ~0ull : (1ull << lanes) - 1;
		ks[0] = (1ull << (lanes / 2 ? lanes / 2 : 1)) - 1;
		ks[1] = all & ~ks[0];
		ks[2] = 0;
		if (hw_run(code, f, lo_page, all) == SIGILL) {
			skipped++;
			continue;
		}
		ran++;
		for (int e = 0; e < 3; e++) {
			uint64_t lo = ~0ull, hi = 0, m;
			int n, sig;

			vec.k[1] = ks[e];
			n = gb_insn_accesses(&in, &cpu, acc, GB_MAX_ACCESSES);
			cr_assert_geq(n, 0, "%s: accesses failed", f->name);
			for (int j = 0; j < n; j++) {
				lo = acc[j].addr < lo ? acc[j].addr : lo;
				hi = acc[j].addr + acc[j].size > hi ? acc[j].addr + acc[j].size : hi;
			}
			if (n == 0 && none_done)
				continue;
			if (n == 0) {            /* (C) nothing reported: all on the guard */
				m = hi_page + 8;
				none_done = true;
			} else if (e == 0) {     /* (A) guard right after the last byte */
				m = hi_page - (hi - base);
			} else {                 /* (B) guard right before the first byte */
				m = lo_page - (lo - base);
			}
			sig = hw_run(code, f, m, ks[e]);
			cr_expect_eq(sig, 0, "%s: k1=0x%llx: the CPU touched memory the decoder "
				     "did not report (%d accesses)", f->name, (unsigned long long)ks[e], n);
			failed += sig != 0;
		}
	}
	cr_log_info("decode_hw: %d forms run, %d not supported by this CPU, %d faults",
		    ran, skipped, failed);
	cr_assert_gt(ran, 0, "no form could run on this CPU");
	munmap(code, 4096);
	munmap(mem, 3 * 4096);
}
