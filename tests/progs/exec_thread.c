/* exec_thread [N]: an exec from a thread other than the main one, while the
 * main thread keeps entering the range.  N > 0: a second thread calls
 * `traced` 3 times, prints "gen N: SUM" and execs this program with N-1;
 * meanwhile the main thread calls `traced` in a loop (10 times before the
 * other starts, 20 us apart) until the exec kills it (inside the range or
 * not).  N = 0: the one thread calls `traced` 3 times
 * and prints "gen 0: SUM".  Default N 2 (three images).  Exit 0.
 * exec_thread N quiet: the same, but the main thread calls `traced` 3 times
 * before it starts the other one, then waits for it (outside the range)
 * until the exec kills it: one thread at a time in the range, the trace
 * the same at every run.
 * Range: `traced`. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) long traced(long x)
{
	long s = 0;
	for (int i = 0; i < 64; i++)
		s += (x ^ i) * 3;
	return s;
}

static volatile long sink, calls;
static const char *mode = "";

static long three(long n)
{
	long s = 0;
	for (int k = 0; k < 3; k++)
		s += traced(n + k);
	printf("gen %ld: %ld\n", n, s);
	fflush(stdout);
	return s;
}

static void *worker(void *arg)
{
	long n = (long)arg;
	char b[16];
	while (calls < 10)
		; /* (the main thread enters the range first) */
	three(n);
	snprintf(b, sizeof(b), "%ld", n - 1);
	execl("/proc/self/exe", "exec_thread", b, mode, (char *)0);
	perror("exec_thread: execl");
	_exit(1);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2;
	pthread_t t;
	mode = argc > 2 ? argv[2] : "";
	if (n <= 0) {
		three(0);
		return 0;
	}
	if (*mode) {
		sink += three(-n);
		calls = 10;
	}
	if (pthread_create(&t, NULL, worker, (void *)n))
		return 1;
	if (*mode)
		pthread_join(t, NULL); /* (the exec kills this thread in it) */
	for (long k = 0;; k++) {
		struct timespec ts = { 0, 20000 };
		sink += traced(k);
		calls = k + 1;
		nanosleep(&ts, NULL);
	}
}
