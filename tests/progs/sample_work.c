/* sample_work: a fixed amount of CPU-bound work (for overhead benchmarks).
 *
 *   sample_work [MILLIONS]          (default 500 million loop iterations)
 *
 * Prints {"pid":P,"ns":WALL,"cpu_ns":CPU} for the work alone: the slowdown a
 * sampler causes shows in both numbers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noinline)) unsigned long work(long n)
{
	unsigned long x = 1;
	for (long i = 0; i < n; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

static long long ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long m = argc > 1 ? atol(argv[1]) : 500;
	long long w0 = ns(CLOCK_MONOTONIC), c0 = ns(CLOCK_PROCESS_CPUTIME_ID);

	sink = work(m * 1000000L);
	long long w1 = ns(CLOCK_MONOTONIC), c1 = ns(CLOCK_PROCESS_CPUTIME_ID);
	printf("{\"pid\":%d,\"ns\":%lld,\"cpu_ns\":%lld}\n", getpid(), w1 - w0, c1 - c0);
	return 0;
}
