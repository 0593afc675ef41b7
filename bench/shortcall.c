/* Benchmark tracee: `shortcall [CALLS]` (default 200000) hashes CALLS short
 * keys with `fnv`, an FNV-1a hash of a 6-byte key (40 instructions, 6
 * one-byte reads and the return address's per call: a short function
 * called often, as comparators, hash callbacks and allocators are).  The
 * keys are built in main, outside the range.  Prints a checksum; exit 0.  Built -O2 -static -no-pie
 * (range `fnv`). */
#include <stdio.h>
#include <stdlib.h>

#define KEY 6

__attribute__((noinline)) unsigned fnv(const unsigned char *k)
{
	unsigned h = 2166136261u;
	for (int i = 0; i < KEY; i++) {
		h ^= k[i];
		h *= 16777619u;
	}
	return h;
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 200000;
	unsigned char key[KEY];
	unsigned sum = 0;

	if (calls < 1)
		return 1;
	for (long c = 0; c < calls; c++) {
		for (int i = 0; i < KEY; i++)
			key[i] = (unsigned char)(c >> (i & 3) * 5) + i;
		sum = sum * 31 + fnv(key);
	}
	printf("%08x\n", sum);
	return 0;
}
