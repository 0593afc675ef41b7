/* A long-running target for attach, signals and --duration: calls `traced`
 * ITERS times (default 2000), sleeping SLEEP_US microseconds (default 1000)
 * between calls, then prints a checksum that does not depend on timing.
 * Usage: spin [ITERS [SLEEP_US]].  Prints "ready" first.  Exit 0. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long table[32];

__attribute__((noinline)) long traced(long i)
{
	long s = table[i & 31];
	for (int k = 0; k < 8; k++)
		s = s * 31 + k + i;
	table[i & 31] = s & 0xffff;
	return s;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 2000;
	long sleep_us = argc > 2 ? atol(argv[2]) : 1000;
	struct timespec ts = {sleep_us / 1000000, (sleep_us % 1000000) * 1000};
	unsigned long sum = 0;

	printf("ready\n");
	fflush(stdout);
	for (long i = 0; i < iters; i++) {
		sum += (unsigned long)traced(i);
		if (sleep_us > 0)
			nanosleep(&ts, NULL);
	}
	printf("checksum %lu\n", sum);
	return 0;
}
