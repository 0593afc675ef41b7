/* Thread churn under the patch trap (tests/e2e/test_trap_crash.py,
 * test_trap_patch.py): THREADS threads at a time, each created, calling
 * `traced` CALLS times and exiting, a new one made as soon as the oldest is
 * joined, TOTAL threads in all.  `traced` calls `helper` (out of the range:
 * its return site is an entry of its own) and every 16th call makes a
 * system call inside the range (a 20 us nanosleep).
 *
 * Usage: pt_churn THREADS TOTAL CALLS [prefix].  Prints "TOTAL SUM", SUM
 * depending only on the arguments (each thread's checksum mixed by its
 * number, in any order).  SIGUSR1 (taken by the main thread: the others
 * block it) ends it early: no thread is made after it, those made are
 * joined, and it prints "MADE SUM", the line a run with TOTAL = MADE
 * prints; `prefix` prints that line after every join, "K SUM" for K = 1 ..
 * TOTAL (the campaigns' native reference for a run they end early:
 * tests/e2e/test_trap_crash.py).  Exit 0 (2 on bad arguments).  Range:
 * `traced`. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>

#define MAXTHREADS 64

static long calls;

__attribute__((noinline)) long helper(long x)
{
	return x * 7 + 1;
}

#ifndef PT_CHURN_TRACED /* (pt_relchurn.c brings its own) */
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
		v += r == -EINTR ? 0 : r;
	}
	slot[i & 3] = v & 0xffffff;
	return v & 0xffff;
}
#endif

static void *worker(void *arg)
{
	long id = (long)arg;
	long slot[4] = { id + 1, id + 2, id + 3, id + 4 };
	unsigned long sum = (unsigned long)id;
	for (long i = 0; i < calls; i++)
		sum = sum * 31 + (unsigned long)traced(slot, i);
	return (void *)sum;
}

static volatile sig_atomic_t stop;

static void on_usr1(int sig)
{
	(void)sig;
	stop = 1;
}

/* A worker made with SIGUSR1 blocked (it inherits the mask), the main
 * thread's unblocked again. */
static int spawn(pthread_t *t, long id)
{
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	int r = pthread_create(t, NULL, worker, (void *)id);
	pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
	return r;
}

int main(int argc, char **argv)
{
	pthread_t t[MAXTHREADS];
	bool ok = argc == 4 || (argc == 5 && !strcmp(argv[4], "prefix"));
	int n = ok ? atoi(argv[1]) : 0;
	long total = ok ? atol(argv[2]) : 0;
	calls = ok ? atol(argv[3]) : 0;
	if (n < 1 || n > MAXTHREADS || total < n || calls < 1)
		return 2;
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_RESTART };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	unsigned long sum = 0;
	long made = 0, joined = 0;
	for (; made < n; made++)
		if (spawn(&t[made % n], made))
			return 1;
	while (joined < made) {
		void *r;
		pthread_join(t[joined % n], &r);
		sum += (unsigned long)r * (2 * (unsigned long)joined + 1);
		joined++;
		if (argc == 5)
			printf("%ld %lx\n", joined, sum);
		if (made < total && !stop) {
			if (spawn(&t[made % n], made))
				return 1;
			made++;
		}
	}
	if (argc == 4)
		printf("%ld %lx\n", joined, sum);
	return 0;
}
