/* A range whose entry is a VEX-encoded instruction (AVX2 `vmovdqu` store),
 * and one whose entry is an EVEX one (AVX-512 `vmovdqu64`, where the CPU
 * has it): Linux's uprobes take the opcode byte after a VEX/EVEX prefix for
 * a one-byte opcode (0x7f: jg) and emulate that instead of running the
 * instruction, so a uprobe on either entry leaves the store undone
 * (docs/bpf.md "What a uprobe runs"); gebpf must never probe one
 * (tests/e2e/test_probetrap.py).
 *
 * Usage: uprobe_vex N [evex].  Calls traced_vex (or traced_evex) N times,
 * each storing a vector register that holds a value depending on the call,
 * and prints a checksum of what was stored.  Exit 0; 2 when evex is asked
 * and the CPU has no AVX-512 (the test skips).  Range: traced_vex,
 * traced_evex. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char out[64];

__attribute__((noinline, target("avx2"))) void traced_vex(void)
{
	__asm__ volatile("vmovdqu %%ymm1, %0\n\t" : "=m"(*(unsigned char(*)[32])out) :: "memory");
}

__attribute__((noinline, target("avx512f"))) void traced_evex(void)
{
	__asm__ volatile("vmovdqu64 %%zmm17, %0\n\t" : "=m"(out) :: "memory");
}

/* (out of the range: the register the traced function stores) */
__attribute__((noinline, target("avx2"))) void set_vex(unsigned v)
{
	__asm__ volatile("vmovd %0, %%xmm1\n\tvpbroadcastd %%xmm1, %%ymm1" :: "r"(v) : "xmm1");
}

__attribute__((noinline, target("avx512f"))) void set_evex(unsigned v)
{
	__asm__ volatile("vpbroadcastd %0, %%zmm17" :: "r"(v) : "xmm17");
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10;
	int evex = argc > 2 && !strcmp(argv[2], "evex");
	unsigned long sum = 0;
	if (evex && !__builtin_cpu_supports("avx512f"))
		return 2;
	if (!__builtin_cpu_supports("avx2"))
		return 2;
	for (long i = 0; i < n; i++) {
		unsigned v = 0x01010101u * (unsigned)(i % 200 + 1);
		if (evex) {
			set_evex(v);
			traced_evex();
		} else {
			set_vex(v);
			traced_vex();
		}
		for (int k = 0; k < (evex ? 64 : 32); k++)
			sum = sum * 31 + out[k];
	}
	printf("%lx\n", sum);
	return 0;
}
