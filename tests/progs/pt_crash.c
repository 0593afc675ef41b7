/* The patch trap's crash-safety job (tests/e2e/test_trap_crash.py): THREADS
 * threads (1 to 8) each call `traced` in a loop, FILL iterations of
 * out-of-range work between two calls (thousands of entries a second per
 * thread).  `traced` calls `helper` (out of the range: its return site is an
 * entry of its own, so there are several patches, and the cache's lock is
 * released and taken again) and every 16th call makes a system call inside
 * the range (a 20 us nanosleep: a thread parked in a system call of the
 * cache).
 *
 * Usage: pt_crash THREADS FILL[p] [N0 N1 ...].  FILLp paces the threads: a
 * burst of calls for ~0.2 ms, then 0.8 ms asleep (out of the range), a fifth
 * of a CPU each, for the runs that need entries, not the full rate (the kill
 * campaigns' tests wait seconds on it, and three threads flat out took every
 * cycle the tests beside them needed: docs/testing.md "Where the CPU goes");
 * the output is the same.  With the Ns, thread k makes Nk
 * calls and a FILL over 64 is summed by a formula, not run (a reference
 * run's CPU is a sixth at 20000); without them the threads run until
 * SIGUSR1 (each stops at its next call).  Prints one line per thread, "CALLS SUM", SUM depending only on
 * CALLS, FILL and k: the output of a run stopped by SIGUSR1 is that of a run
 * given its counts.  Exit 0 (2 on bad arguments).  Range: `traced`. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>

#define MAXTHREADS 8

static volatile sig_atomic_t stop;
static long fill, want[MAXTHREADS], done[MAXTHREADS];
static int paced;
static unsigned long sums[MAXTHREADS];

static void on_usr1(int sig)
{
	(void)sig;
	stop = 1;
}

__attribute__((noinline)) long helper(long x)
{
	return x * 7 + 1;
}

#ifndef PT_CRASH_TRACED /* (pt_short.c brings its own, and its ways in) */
#define CALL_TRACED(slot, i) traced(slot, i)
__attribute__((noinline)) long traced(long *slot, long i)
{
	long v = slot[i & 3] * 31 + i;
	v += helper(v & 0xff);
	if ((i & 15) == 0) {
		struct timespec ts = { 0, 20000 };
		long r;
		__asm__ volatile("syscall"
				 : "=a"(r)
				 : "0"((long)SYS_nanosleep), "D"(&ts), "S"(0L)
				 : "rcx", "r11", "memory");
		v += r == -EINTR ? 0 : r; /* (SIGUSR1 may cut it short natively) */
	}
	slot[i & 3] = v & 0xffffff;
	return v & 0xffff;
}
#endif

__attribute__((noinline)) long filler(long n, long x)
{
	volatile long s = x;
	for (long k = 0; k < n; k++)
		s += k ^ x;
	return s;
}

/* filler's result without its loop, for the runs given their counts (the
 * reference a traced run's output is checked against: the same sums at a
 * fraction of the CPU): bit b of k ^ x is set for the k < n whose bit b
 * differs from x's, counted per bit. */
static long filler_sum(long n, long x)
{
	unsigned long s = (unsigned long)x;
	for (int b = 0; b < 63; b++) {
		unsigned long per = 1ul << b, u = (unsigned long)n;
		unsigned long set = (u >> (b + 1)) * per;
		unsigned long rest = u & (2 * per - 1);
		set += rest > per ? rest - per : 0;
		s += ((x >> b) & 1 ? u - set : set) << b;
	}
	return (long)s;
}

static long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void *worker(void *arg)
{
	long id = (long)arg;
	long slot[4] = { id + 1, id + 2, id + 3, id + 4 };
	unsigned long sum = 0;
	long i, burst = now_ns();
	const struct timespec nap = { 0, 800000 };
	for (i = 0; want[id] < 0 ? !stop : i < want[id]; i++) {
		sum = sum * 31 + (unsigned long)CALL_TRACED(slot, i);
		/* (the formula for a large FILL only: its 63 rounds cost more
		 * than a small loop, and a stepped run makes every one a step) */
		bool sum_it = want[id] >= 0 && fill > 64;
		long f = sum_it ? filler_sum(fill, i + id) : filler(fill, i + id);
		if (sum_it && i < 4 && f != filler(fill, i + id))
			abort(); /* (the formula is filler's: checked at each run) */
		sum += (unsigned long)f & 0xff;
		if (paced && now_ns() - burst > 200000) {
			nanosleep(&nap, NULL);
			burst = now_ns();
		}
	}
	done[id] = i;
	sums[id] = sum;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[MAXTHREADS];
	int n = argc > 1 ? atoi(argv[1]) : 0;
	if (n < 1 || n > MAXTHREADS || argc < 3 || (argc > 3 && argc != 3 + n))
		return 2;
	char *end;
	fill = strtol(argv[2], &end, 10);
	paced = *end == 'p';
	for (int k = 0; k < n; k++)
		want[k] = argc > 3 ? atol(argv[3 + k]) : -1;
	if (argc == 3) {
		struct sigaction sa = { .sa_handler = on_usr1 };
		sigemptyset(&sa.sa_mask);
		sigaction(SIGUSR1, &sa, NULL);
	}
	for (long k = 1; k < n; k++)
		pthread_create(&t[k], NULL, worker, (void *)k);
	worker((void *)0);
	for (int k = 1; k < n; k++)
		pthread_join(t[k], NULL);
	for (int k = 0; k < n; k++)
		printf("%ld %lx\n", done[k], sums[k]);
	return 0;
}
