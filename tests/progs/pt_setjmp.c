/* Probe trap: longjmp back into the range from outside it.  `traced` calls
 * setjmp, then `bail` (out of range), which longjmps for odd values: libc's
 * longjmp lands in `traced` right after its call to setjmp, an entry
 * reached by no branch and while the range is not active.  Usage:
 * pt_setjmp [N] (default 20).  Prints a checksum; exit 0.  Range: `traced`. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

static jmp_buf env;

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
	return acc;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20;
	long sum = 0;
	for (int i = 0; i < n; i++)
		sum = sum * 7 + traced(i);
	printf("checksum %lx\n", (unsigned long)sum);
	return 0;
}
