/* Probe trap crash safety and attach mode: a program that enters `traced`
 * thousands of times a second.  Each of CALLS iterations calls `traced`
 * once and then FILL iterations of out-of-range work.  The defaults (30000
 * calls, FILL 150000) run about 3 s natively here.  Usage: pt_hot [CALLS
 * [FILL]].  Prints a checksum that depends only on the arguments; exit 0.
 * CALLS -1: run until SIGUSR1 (a test that must not race the clock), then
 * print "calls N" before the checksum, which is that of `pt_hot N FILL`.
 * Range: `traced`. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

static volatile sig_atomic_t stop;

static void on_usr1(int sig)
{
	(void)sig;
	stop = 1;
}

__attribute__((noinline)) long traced(long *slot, long i)
{
	long v = slot[i & 3] * 31 + i;
	slot[i & 3] = v & 0xffffff;
	return v & 0xffff;
}

__attribute__((noinline)) long filler(long n, long x)
{
	volatile long s = x;
	for (long k = 0; k < n; k++)
		s += k ^ x;
	return s;
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 30000;
	long fill = argc > 2 ? atol(argv[2]) : 150000;
	static long slot[4] = {1, 2, 3, 4};
	unsigned long sum = 0;
	if (calls < 0)
		signal(SIGUSR1, on_usr1);
	long i;
	for (i = 0; calls < 0 ? !stop : i < calls; i++) {
		sum = sum * 31 + (unsigned long)traced(slot, i);
		sum += (unsigned long)filler(fill, i) & 0xff;
	}
	if (calls < 0)
		printf("calls %ld\n", i);
	printf("checksum %lx\n", sum);
	return 0;
}
