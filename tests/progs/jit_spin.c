/* A long loop inside the range, for the translating engine's kill and
 * interrupt tests: `traced` runs ROUNDS rounds of a loop over a table
 * (loads, stores, a call out of the range every 4096 steps), and main
 * prints "ready" first (stdout flushed) and the checksum at the end, which
 * depends only on ROUNDS and STEPS.  Usage: jit_spin [ROUNDS [STEPS]]
 * (default 200 rounds of 65536 steps).
 * Exit 0.  Range: `traced`. */
#include <stdio.h>
#include <stdlib.h>

static unsigned long table[512];

__attribute__((noinline)) unsigned long outside(unsigned long x) { return x * 2654435761u; }

static long steps = 65536;

__attribute__((noinline)) unsigned long traced(long rounds)
{
	unsigned long s = 1;
	for (long r = 0; r < rounds; r++)
		for (long k = 0; k < steps; k++) {
			unsigned long *p = &table[(k * 7 + r) & 511];
			s = s * 31 + *p + (unsigned long)k;
			*p = s >> 7;
			if ((k & 4095) == 0)
				s ^= outside(s);
		}
	return s;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 200;
	if (argc > 2)
		steps = atol(argv[2]);
	for (int k = 0; k < 512; k++)
		table[k] = (unsigned long)k * 3 + 1;
	printf("ready\n");
	fflush(stdout);
	printf("checksum %lx\n", traced(rounds));
	return 0;
}
