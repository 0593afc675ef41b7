/* sample_hotcold: spend ~90% of the CPU time in hot() and ~10% in cold().
 *
 *   sample_hotcold [SECONDS] [THREADS]      (defaults: 2 seconds, 1 thread)
 *
 * hot() and cold() run the same loop body, hot() nine times as many
 * iterations, so the split is by construction.  With THREADS > 1 the main
 * thread starts THREADS-1 more threads doing the same (a sampler must follow
 * them).  Prints {"pid":P,"tids":[...]} on stdout when done.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define UNIT 200000L        /* iterations per cold() call: ~0.2 ms */

static double seconds = 2;

__attribute__((noinline, noclone)) unsigned long hot(unsigned long x)
{
	for (long i = 0; i < 9 * UNIT; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

__attribute__((noinline, noclone)) unsigned long cold(unsigned long x)
{
	for (long i = 0; i < UNIT; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static volatile unsigned long sink;
static pid_t tids[64];

static void *run(void *arg)
{
	long idx = (long)arg;
	double end = now() + seconds;
	unsigned long x = (unsigned long)idx;

	tids[idx] = (pid_t)syscall(SYS_gettid);
	while (now() < end) {
		x = hot(x);
		x = cold(x);
	}
	sink = x;
	return NULL;
}

int main(int argc, char **argv)
{
	long nthreads = 1;
	pthread_t th[64];

	if (argc > 1)
		seconds = atof(argv[1]);
	if (argc > 2)
		nthreads = atol(argv[2]);
	if (nthreads < 1 || nthreads > 64)
		return 2;
	for (long i = 1; i < nthreads; i++)
		pthread_create(&th[i], NULL, run, (void *)i);
	run((void *)0);
	for (long i = 1; i < nthreads; i++)
		pthread_join(th[i], NULL);
	printf("{\"pid\":%d,\"tids\":[", getpid());
	for (long i = 0; i < nthreads; i++)
		printf("%s%d", i ? "," : "", tids[i]);
	printf("]}\n");
	return 0;
}
