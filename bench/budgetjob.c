/* Benchmark tracee of bench_budget.py: `budgetjob THREADS SECONDS SKIP`
 * runs THREADS threads (default 4) that call `hot` in a loop for SECONDS
 * (default 3), each counting its own calls; `hot` is an FNV-1a hash of a
 * 16-byte key (about 90 instructions, 16 one-byte reads and the return
 * address's per call).  Prints `calls N seconds S cpu C` for the calls
 * made after SKIP seconds (default 1: a trace's --max-events budget is
 * full by then), S the wall time and C the CPU time the threads ran
 * meanwhile (a loaded machine's wall rate says little), and a checksum;
 * exit 0.  Built -O2 -static -no-pie (range `hot`).
 * The calls a thread makes are not fixed (it runs for a time): for the
 * exactness check, `budgetjob THREADS -CALLS` makes CALLS calls per thread
 * instead and prints only the checksum. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define KEY 16
#define MAXT 16

struct slot { volatile long calls; unsigned sum; char pad[64 - sizeof(long) - sizeof(unsigned)]; };
static struct slot slots[MAXT];
static volatile int stop;
static long fixed;

__attribute__((noinline)) unsigned hot(const unsigned char *k)
{
	unsigned h = 2166136261u;
	for (int i = 0; i < KEY; i++) {
		h ^= k[i];
		h *= 16777619u;
	}
	return h;
}

static void *worker(void *arg)
{
	struct slot *s = arg;
	unsigned char key[KEY];
	for (long c = 0; fixed ? c < fixed : !stop; c++) {
		for (int i = 0; i < KEY; i++)
			key[i] = (unsigned char)(c >> (i & 3) * 5) + i;
		s->sum = s->sum * 31 + hot(key);
		s->calls = c + 1;
	}
	return NULL;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static long total(int n)
{
	long c = 0;
	for (int i = 0; i < n; i++)
		c += slots[i].calls;
	return c;
}

/* The CPU seconds the threads have run (the machine's load aside). */
static double cpu(const pthread_t *t, int n)
{
	double s = 0;
	for (int i = 0; i < n; i++) {
		clockid_t c;
		struct timespec ts;
		if (!pthread_getcpuclockid(t[i], &c) && !clock_gettime(c, &ts))
			s += ts.tv_sec + ts.tv_nsec / 1e9;
	}
	return s;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4;
	double secs = argc > 2 ? atof(argv[2]) : 3, skip = argc > 3 ? atof(argv[3]) : 1;
	pthread_t t[MAXT];
	if (argc > 2 && argv[2][0] == '-')
		fixed = atol(argv[2] + 1);
	if (n < 1 || n > MAXT || (!fixed && secs <= skip))
		return 2;
	double t0 = now();
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, worker, &slots[i]);
	long c0 = 0;
	double t1 = t0, u0 = 0, u1 = 0;
	if (!fixed) {
		while (now() - t0 < skip)
			nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
		c0 = total(n);
		u0 = cpu(t, n);
		t1 = now();
		while (now() - t0 < secs)
			nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
		u1 = cpu(t, n);
		stop = 1;
	}
	long c1 = total(n);
	double t2 = now();
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	unsigned sum = 0;
	for (int i = 0; i < n; i++)
		sum = sum * 7 + slots[i].sum;
	if (!fixed)
		printf("calls %ld seconds %.6f cpu %.6f\n", c1 - c0, t2 - t1, u1 - u0);
	printf("checksum %08x\n", sum);
	return 0;
}
