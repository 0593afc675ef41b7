/* sample_phases: a hot function that changes with the wall clock's second.
 *
 *   sample_phases [SECONDS]      (default 5)
 *
 * While CLOCK_REALTIME's whole second s has s % 4 == i, the time goes to
 * phaseI() (i = 0..3), in calls of ~0.1 ms between two reads of the clock,
 * so that a profile of a known wall-clock interval has known shares of the
 * four functions (continuous sampling: samples of one period do not leak
 * into the next).  Prints its pid on stdout at the start.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define UNIT 100000L

#define PHASE(n)                                                                   \
	__attribute__((noinline, noclone)) unsigned long phase##n(unsigned long x) \
	{                                                                          \
		for (long i = 0; i < UNIT; i++)                                    \
			x = x * 6364136223846793005UL + 1442695040888963407UL + n; \
		return x;                                                          \
	}
PHASE(0)
PHASE(1)
PHASE(2)
PHASE(3)

static volatile unsigned long sink;

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 5;
	unsigned long (*const fn[4])(unsigned long) = { phase0, phase1, phase2, phase3 };
	struct timespec ts, end;
	unsigned long x = 1;

	printf("%d\n", getpid());
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += (time_t)seconds;
	end.tv_nsec += (long)((seconds - (time_t)seconds) * 1e9);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		if (ts.tv_sec > end.tv_sec || (ts.tv_sec == end.tv_sec && ts.tv_nsec >= end.tv_nsec))
			break;
		clock_gettime(CLOCK_REALTIME, &ts);
		x = fn[ts.tv_sec % 4](x);
	}
	sink = x;
	return 0;
}
