/* Probe trap: longjmp back into the range from outside it.  `traced` calls
 * setjmp, then `bail` (out of range), which longjmps for odd values: libc's
 * longjmp lands in `traced` right after its call to setjmp, an entry
 * reached by no branch and while the range is not active.  With "out",
 * `traced` also longjmps OUT of the range, to a setjmp in main, for every
 * value 2 mod 4 (the range is left by no return).  Usage:
 * pt_setjmp [N [out]] (default 20).  Prints a checksum; exit 0.
 * Range: `traced`. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static jmp_buf env, outer;
static int out_mode;

__attribute__((noinline)) void bail(int i)
{
	if (i & 1)
		longjmp(env, i + 1);
}

__attribute__((noinline)) long traced(int i)
{
	volatile long acc = i;
	int r = setjmp(env);
	if (r == 0) {
		bail(i);
		acc += 100;
	} else {
		acc += r * 3;
	}
	if (out_mode && (i & 3) == 2)
		longjmp(outer, (int)(acc & 0xffff) + 1);
	return acc;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20;
	volatile long sum = 0;
	out_mode = argc > 2 && !strcmp(argv[2], "out");
	for (volatile int i = 0; i < n; i++) {
		int r = setjmp(outer);
		if (r == 0)
			sum = sum * 7 + traced(i);
		else
			sum = sum * 7 + 1000 + r;
	}
	printf("checksum %lx\n", (unsigned long)sum);
	return 0;
}
