/* Signal handlers that enter the range while their thread is inside it
 * (tests/e2e/test_trap_crash.py; docs/trace.md "Ending").  THREADS threads
 * (1 to 8; the main thread is the first) call `traced` in a loop, FILL
 * iterations of work outside the range between two calls.  A profiling
 * timer's SIGPROF (every 300 us of the process's CPU time, so it lands in a
 * thread that runs, often inside `traced`) has a handler that calls `traced` too, on
 * slots of its own.  `traced` calls `helper` (out of the range) and every
 * 8th call makes a system call inside the range (a 20 us nanosleep, which
 * a signal may interrupt).  Every result, the handler's and the threads',
 * is checked against `reference` (the same arithmetic outside the range):
 * a register or a slot that the nested call clobbered in the interrupted
 * one shows.
 *
 * Usage and output as pt_crash: pt_signest THREADS FILL [N0 N1 ...].  With
 * the Ns thread k makes Nk calls, without them the threads run until
 * SIGUSR1.  One line per thread, "CALLS SUM", SUM depending only on CALLS,
 * FILL and k, unless a check failed anywhere (then every SUM has bit 40
 * flipped).  Exit 0 (2 on bad arguments).  Range: `traced`. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>

#define MAXTHREADS 8

static volatile sig_atomic_t stop;
static volatile long bad;
static long fill, want[MAXTHREADS], done[MAXTHREADS];
static unsigned long sums[MAXTHREADS];
/* the handler's, per thread (handlers of two threads may run at once) */
static __thread long hslot[4] = { 5, 6, 7, 8 }, hcopy[4] = { 5, 6, 7, 8 }, hcalls;

__attribute__((noinline)) long helper(long x)
{
	return (x ^ 0x5a) * 3;
}

__attribute__((noinline)) long traced(long *slot, long i)
{
	long v = slot[i & 3] * 17 + i;
	v ^= helper(v & 0x3ff);
	if ((i & 7) == 0) {
		struct timespec ts = { 0, 20000 };
		long r;
		__asm__ volatile("syscall"
				 : "=a"(r)
				 : "0"((long)SYS_nanosleep), "D"(&ts), "S"(0L)
				 : "rcx", "r11", "memory");
		(void)r;
	}
	slot[i & 3] = v & 0xfffff;
	return v & 0xfff;
}

/* traced's arithmetic, outside the range. */
__attribute__((noinline)) long reference(long *slot, long i)
{
	long v = slot[i & 3] * 17 + i;
	v ^= ((v & 0x3ff) ^ 0x5a) * 3;
	slot[i & 3] = v & 0xfffff;
	return v & 0xfff;
}

static void on_prof(int sig)
{
	(void)sig;
	long i = hcalls++;
	if (traced(hslot, i) != reference(hcopy, i) || hslot[i & 3] != hcopy[i & 3])
		bad = 1;
}

static void on_usr1(int sig)
{
	(void)sig;
	stop = 1;
}

__attribute__((noinline)) long filler(long n, long x)
{
	volatile long s = x;
	for (long k = 0; k < n; k++)
		s += k ^ x;
	return s;
}

static void *worker(void *arg)
{
	long id = (long)arg;
	long slot[4] = { id + 1, id + 2, id + 3, id + 4 }, copy[4] = { id + 1, id + 2, id + 3, id + 4 };
	unsigned long sum = 0;
	long i;
	for (i = 0; want[id] < 0 ? !stop : i < want[id]; i++) {
		long r = traced(slot, i);
		if (r != reference(copy, i) || slot[i & 3] != copy[i & 3])
			bad = 1;
		sum = sum * 33 + (unsigned long)r + ((unsigned long)filler(fill, i ^ id) & 0xf);
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
	fill = atol(argv[2]);
	for (int k = 0; k < n; k++)
		want[k] = argc > 3 ? atol(argv[3 + k]) : -1;
	struct sigaction sa = { .sa_handler = on_prof, .sa_flags = SA_RESTART };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPROF, &sa, NULL);
	if (argc == 3) {
		sa.sa_handler = on_usr1;
		sa.sa_flags = 0;
		sigaction(SIGUSR1, &sa, NULL);
	}
	struct itimerval it = { { 0, 300 }, { 0, 300 } };
	setitimer(ITIMER_PROF, &it, NULL);
	for (long k = 1; k < n; k++)
		pthread_create(&t[k], NULL, worker, (void *)k);
	worker((void *)0);
	for (int k = 1; k < n; k++)
		pthread_join(t[k], NULL);
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_PROF, &off, NULL);
	for (int k = 0; k < n; k++)
		printf("%ld %lx\n", done[k], sums[k] ^ (bad ? 1ul << 40 : 0));
	return 0;
}
