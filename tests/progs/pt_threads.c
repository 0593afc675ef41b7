/* Probe trap: four threads entering the range concurrently.  They start
 * together at a barrier and each calls `traced` CALLS times on its own
 * slot.  Usage: pt_threads [CALLS] (default 25).  Prints each thread's
 * checksum (in thread order); exit 0.  Range: `traced`. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NTHREADS 4

static pthread_barrier_t start;
static long calls = 25;
static long result[NTHREADS];

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
	pthread_t t[NTHREADS];
	if (argc > 1)
		calls = atol(argv[1]);
	pthread_barrier_init(&start, NULL, NTHREADS);
	for (long i = 0; i < NTHREADS; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < NTHREADS; i++)
		printf("thread %d checksum %lx\n", i, (unsigned long)result[i]);
	return 0;
}
