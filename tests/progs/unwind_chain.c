/* unwind_chain: main -> chain1 -> ... -> chain5 -> leaf_hot (in
 * lib/libunwindleaf.so), all built -O2 -fomit-frame-pointer, so only DWARF
 * CFI can unwind it.  Runs for SECONDS (default 3) of CPU time.  With
 * VDSO_CALLS, each round also calls clock_gettime(CLOCK_MONOTONIC) that
 * many times: time spent in the vDSO, a pc in no mapped file, which makes
 * gebpf's unwinder read the process's maps again (tests/e2e).
 *
 *   unwind_chain [SECONDS [VDSO_CALLS]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

unsigned long leaf_hot(unsigned long x, long n);

static volatile unsigned long sink;

/* Each level does work after the call, so no call becomes a jump. */
#define LEVEL(name, next)                                                        \
	__attribute__((noinline)) unsigned long name(unsigned long x, long n)    \
	{                                                                        \
		unsigned long r = next(x ^ 0x9e3779b97f4a7c15UL, n);             \
		sink = r;                                                        \
		return r + x;                                                    \
	}

LEVEL(chain5, leaf_hot)
LEVEL(chain4, chain5)
LEVEL(chain3, chain4)
LEVEL(chain2, chain3)
LEVEL(chain1, chain2)

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3.0;
	long vdso_calls = argc > 2 ? atol(argv[2]) : 0;
	struct timespec t0, t, m;
	unsigned long x = 1;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
	do {
		x = chain1(x, 2000000);
		for (long i = 0; i < vdso_calls; i++)
			clock_gettime(CLOCK_MONOTONIC, &m);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	} while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
	printf("%lu\n", x & 1);
	return 0;
}
