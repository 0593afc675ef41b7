/* A program for gebpf resume tests: vector state held across a snapshot.
 * It fills ymm0-15 (and, with AVX-512, zmm0-31 and k1-7) with a pattern
 * that differs in every byte, calls vec_checkpoint() (the point `gebpf snap
 * --at vec_checkpoint` stops at; it touches no register), then stores the
 * registers as they are after the call and prints one line per register
 * plus "avx512 0|1".  A resume that loses the upper halves (or zmm16-31, or
 * the masks) prints other lines than the uninterrupted run. */
#include <cpuid.h>
#include <stdint.h>
#include <stdio.h>

__asm__(".globl vec_checkpoint\n"
	".type vec_checkpoint,@function\n"
	"vec_checkpoint:\n"
	"	nop\n"
	"	ret\n"
	".size vec_checkpoint, .-vec_checkpoint\n");

static int has_avx512(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & (1u << 16)))
		return 0;
	uint32_t lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (lo & 0xe6) == 0xe6; /* the OS saves opmask, zmm_hi256, hi16_zmm */
}

static uint8_t in[32][64] __attribute__((aligned(64)));
static uint8_t out[32][64] __attribute__((aligned(64)));
static uint64_t kin[8], kout[8];

#define Y(n) "vmovdqu " #n "*64(%0), %%ymm" #n "\n"
#define YS(n) "vmovdqu %%ymm" #n ", " #n "*64(%1)\n"
#define Z(n) "vmovdqu64 " #n "*64(%0), %%zmm" #n "\n"
#define ZS(n) "vmovdqu64 %%zmm" #n ", " #n "*64(%1)\n"

int main(void)
{
	for (int r = 0; r < 32; r++)
		for (int i = 0; i < 64; i++)
			in[r][i] = (uint8_t)(i + 1 + r * 67); /* odd step: all 32 differ */
	for (int k = 1; k < 8; k++)
		kin[k] = 0x0101010101010101ull * (uint64_t)k ^ 0xf0e0d0c0b0a09080ull;
	int z = has_avx512();
	if (!z) {
		__asm__ volatile(Y(0) Y(1) Y(2) Y(3) Y(4) Y(5) Y(6) Y(7) Y(8) Y(9) Y(10) Y(11)
				 Y(12) Y(13) Y(14) Y(15)
				 "call vec_checkpoint\n"
				 YS(0) YS(1) YS(2) YS(3) YS(4) YS(5) YS(6) YS(7) YS(8) YS(9) YS(10)
				 YS(11) YS(12) YS(13) YS(14) YS(15)
				 :
				 : "r"(in), "r"(out)
				 : "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6",
				   "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
				   "xmm14", "xmm15");
	} else {
		__asm__ volatile("kmovq 8(%2), %%k1\n kmovq 16(%2), %%k2\n kmovq 24(%2), %%k3\n"
				 "kmovq 32(%2), %%k4\n kmovq 40(%2), %%k5\n kmovq 48(%2), %%k6\n"
				 "kmovq 56(%2), %%k7\n"
				 Z(0) Z(1) Z(2) Z(3) Z(4) Z(5) Z(6) Z(7) Z(8) Z(9) Z(10) Z(11)
				 Z(12) Z(13) Z(14) Z(15) Z(16) Z(17) Z(18) Z(19) Z(20) Z(21) Z(22)
				 Z(23) Z(24) Z(25) Z(26) Z(27) Z(28) Z(29) Z(30) Z(31)
				 "call vec_checkpoint\n"
				 ZS(0) ZS(1) ZS(2) ZS(3) ZS(4) ZS(5) ZS(6) ZS(7) ZS(8) ZS(9) ZS(10)
				 ZS(11) ZS(12) ZS(13) ZS(14) ZS(15) ZS(16) ZS(17) ZS(18) ZS(19)
				 ZS(20) ZS(21) ZS(22) ZS(23) ZS(24) ZS(25) ZS(26) ZS(27) ZS(28)
				 ZS(29) ZS(30) ZS(31)
				 "kmovq %%k1, 8(%3)\n kmovq %%k2, 16(%3)\n kmovq %%k3, 24(%3)\n"
				 "kmovq %%k4, 32(%3)\n kmovq %%k5, 40(%3)\n kmovq %%k6, 48(%3)\n"
				 "kmovq %%k7, 56(%3)\n"
				 :
				 : "r"(in), "r"(out), "r"(kin), "r"(kout)
				 : "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6",
				   "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
				   "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20",
				   "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27",
				   "xmm28", "xmm29", "xmm30", "xmm31", "k1", "k2", "k3", "k4", "k5",
				   "k6", "k7");
	}
	int nreg = z ? 32 : 16, width = z ? 64 : 32;
	for (int r = 0; r < nreg; r++) {
		printf("%smm%d ", z ? "z" : "y", r);
		for (int i = width - 1; i >= 0; i--)
			printf("%02x", out[r][i]);
		printf("\n");
	}
	for (int k = 1; z && k < 8; k++)
		printf("k%d %016llx\n", k, (unsigned long long)kout[k]);
	printf("avx512 %d\n", z);
	return 0;
}
