/* The README's demo tracee: main() calls hot() in a loop; hot() mixes an
 * array into a running checksum.  `scripts/demo` traces hot() exactly. */
#include <stdint.h>
#include <stdio.h>

static uint32_t table[64];

__attribute__((noinline)) uint32_t hot(uint32_t seed, int n)
{
	uint32_t h = seed;
	for (int i = 0; i < n; i++) {
		h = (h ^ table[i & 63]) * 16777619u;
		table[(i * 7) & 63] += h >> 27;
	}
	return h;
}

int main(void)
{
	uint32_t h = 2166136261u;
	for (int i = 0; i < 64; i++)
		table[i] = (uint32_t)i * 2654435761u;
	for (int round = 0; round < 20; round++)
		h = hot(h, 16);
	printf("checksum %08x\n", h);
	return 0;
}
