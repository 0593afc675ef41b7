/* Probe trap: a function split by the compiler.  At -O2 (its rule in
 * progs.mk) gcc moves the unlikely branch of `traced` (it calls the cold
 * `complain`) into `traced.cold`, a separate part in .text.unlikely that
 * jumps back into the middle of `traced`: an entry no call reaches.  The
 * cold path runs for one value in 7.  Usage: pt_cold [N] (default 200).
 * Prints a checksum; exit 0.  Range: `traced`. */
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned complaints;

__attribute__((cold, noinline)) void complain(unsigned v)
{
	complaints += v & 3;
}

__attribute__((noinline)) unsigned traced(unsigned x)
{
	unsigned s = x;
	for (unsigned i = 0; i < 4; i++) {
		if (__builtin_expect((x + i) % 7 == 0, 0)) {
			complain(x + i);
			s ^= 0x5a5a;
		}
		s = s * 31 + i;
	}
	return s;
}

int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 200, sum = 0;
	for (unsigned i = 0; i < n; i++)
		sum = sum * 3 + traced(i);
	printf("checksum %08x complaints %u\n", sum, complaints);
	return 0;
}
