/* Probe trap: re-entry from outside while the range is active higher on
 * the stack.  `traced` calls `outside` (out of range), which calls `traced`
 * again until the depth runs out; each return lands back in the range.
 * Usage: pt_reenter [N] (default 20).  Prints a checksum; exit 0.
 * Range: `traced`. */
#include <stdio.h>
#include <stdlib.h>

long traced(long depth, long x);

__attribute__((noinline)) long outside(long depth, long x)
{
	volatile long y = x * 3 + 1;
	return traced(depth - 1, y) + 2;
}

__attribute__((noinline)) long traced(long depth, long x)
{
	volatile long v = x ^ depth;
	if (depth > 0)
		v += outside(depth, v);
	return v;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20, sum = 0;
	for (long i = 0; i < n; i++)
		sum = sum * 5 + traced(i % 4, i);
	printf("checksum %lx\n", (unsigned long)sum);
	return 0;
}
