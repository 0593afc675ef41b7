/* Thread churn under the patch trap (tests/e2e/test_trap_crash.py,
 * test_trap_patch.py): THREADS threads at a time, each created, calling
 * `traced` CALLS times and exiting, a new one made as soon as the oldest is
 * joined, TOTAL threads in all.  `traced` calls `helper` (out of the range:
 * its return site is an entry of its own) and every 16th call makes a
 * system call inside the range (a 20 us nanosleep).
 *
 * Usage: pt_churn THREADS TOTAL CALLS.  Prints "TOTAL SUM", SUM depending
 * only on the arguments (each thread's checksum mixed by its number, in any
 * order).  Exit 0 (2 on bad arguments).  Range: `traced`. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
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

int main(int argc, char **argv)
{
	pthread_t t[MAXTHREADS];
	int n = argc == 4 ? atoi(argv[1]) : 0;
	long total = argc == 4 ? atol(argv[2]) : 0;
	calls = argc == 4 ? atol(argv[3]) : 0;
	if (n < 1 || n > MAXTHREADS || total < n || calls < 1)
		return 2;
	unsigned long sum = 0;
	long made = 0, joined = 0;
	for (; made < n; made++)
		if (pthread_create(&t[made % n], NULL, worker, (void *)made))
			return 1;
	while (joined < total) {
		void *r;
		pthread_join(t[joined % n], &r);
		sum += (unsigned long)r * (2 * (unsigned long)joined + 1);
		joined++;
		if (made < total) {
			if (pthread_create(&t[made % n], NULL, worker, (void *)made))
				return 1;
			made++;
		}
	}
	printf("%ld %lx\n", total, sum);
	return 0;
}
