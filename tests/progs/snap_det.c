/* Deterministic program for snapshot tests: fills an mmap'ed buffer and a global
 * table with computed values, loads a known pattern into ymm0 (when the CPU
 * has AVX), and calls snap_here() (the point `gebpf snap --at snap_here`
 * stops at).  Prints a checksum; exit 0.  Two launches reach snap_here in
 * exactly the same state. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

uint64_t table[4096];                 /* .bss: pages of zeros and of data */
static const uint8_t ymm_pattern[32] = {
	0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
	0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78, 0x87, 0x96, 0xa5, 0xb4, 0xc3, 0xd2, 0xe1, 0xf0,
};

__attribute__((noinline)) uint64_t snap_here(uint64_t *buf, size_t n)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += buf[i] * (i + 1);
	return sum;
}

int main(void)
{
	size_t n = 3 * 4096 / 8 + 5;   /* spans several pages */
	/* Not malloc: glibc seeds its tcache key from getrandom(2). */
	uint64_t *buf = mmap(NULL, n * sizeof(*buf), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t x = 0x9e3779b97f4a7c15ull;
	if (buf == MAP_FAILED)
		return 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = x;
	}
	for (size_t i = 0; i < 512; i++)   /* only the first page of table */
		table[i] = i * i;
	if (__builtin_cpu_supports("avx"))
		__asm__ volatile("vmovdqu %0, %%ymm0" : : "m"(ymm_pattern) : "xmm0");
	uint64_t sum = snap_here(buf, n);
	printf("sum %llx\n", (unsigned long long)sum);
	return 0;
}
