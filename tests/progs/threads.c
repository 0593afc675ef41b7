/* Two threads, each running `traced` (per-thread data, per-thread stack).
 * Usage: threads [ITERS [DELAY_MS]]: each thread calls traced ITERS times
 * (default 3) after main slept DELAY_MS (default 0; the attach test uses a
 * delay to attach before the threads start).  Prints a checksum that does
 * not depend on scheduling; exit 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct worker {
	int id;
	long iters;
	long acc;
	long data[16];
};

__attribute__((noinline)) long traced(struct worker *w, long i)
{
	long buf[4];
	for (int k = 0; k < 4; k++)
		buf[k] = w->data[(i + k * w->id) & 15] + k;
	w->data[i & 15] = buf[0] ^ buf[3];
	return buf[1] + buf[2];
}

static void *run(void *arg)
{
	struct worker *w = arg;
	for (long i = 0; i < w->iters; i++)
		w->acc += traced(w, i);
	return NULL;
}

int main(int argc, char **argv)
{
	static struct worker w[2];
	pthread_t t[2];
	long iters = argc > 1 ? atol(argv[1]) : 3;
	long delay = argc > 2 ? atol(argv[2]) : 0;

	if (delay > 0) {
		struct timespec ts = {delay / 1000, (delay % 1000) * 1000000L};
		printf("ready\n");
		fflush(stdout);
		nanosleep(&ts, NULL);
	}
	for (int i = 0; i < 2; i++) {
		w[i].id = i + 1;
		w[i].iters = iters;
		for (int k = 0; k < 16; k++)
			w[i].data[k] = k * (i + 1);
		pthread_create(&t[i], NULL, run, &w[i]);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	printf("checksum %ld\n", w[0].acc * 3 + w[1].acc);
	return 0;
}
