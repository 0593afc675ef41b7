/* Probe trap: threads entering the range concurrently (four, or THREADS up
 * to 16).  They start together at a barrier and each calls `traced` CALLS
 * times on its own slot.  Usage: pt_threads [CALLS [THREADS]] (defaults 25,
 * 4).  Prints each thread's checksum (in thread order); exit 0 (2 on a bad
 * THREADS).  Range: `traced`. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAXTHREADS 16

static pthread_barrier_t start;
static long calls = 25;
static long result[MAXTHREADS];

__attribute__((noinline)) long traced(long *slot, long i)
{
	long v = *slot * 31 + i;
	*slot = v & 0xffffff;
	return v & 0xff;
}

static void *worker(void *arg)
{
	long id = (long)arg, slot = id + 1, sum = 0;
	pthread_barrier_wait(&start);
	for (long i = 0; i < calls; i++)
		sum += traced(&slot, i);
	result[id] = sum ^ slot;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[MAXTHREADS];
	int nthreads = argc > 2 ? atoi(argv[2]) : 4;
	if (argc > 1)
		calls = atol(argv[1]);
	if (nthreads < 1 || nthreads > MAXTHREADS)
		return 2;
	pthread_barrier_init(&start, NULL, nthreads);
	for (long i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < nthreads; i++)
		printf("thread %d checksum %lx\n", i, (unsigned long)result[i]);
	return 0;
}
