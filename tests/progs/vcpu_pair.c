/* Two threads running `traced` at the same time: the main thread (QEMU's
 * vCPU 0) and one it creates (vCPU 1), released together by a barrier, for
 * the QEMU plugin's multi-vCPU ordering (tests/e2e/test_qemu_plugin.py).
 * Usage: vcpu_pair [ITERS] (default 20000 calls each).  Prints a checksum
 * that does not depend on scheduling; exit 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct worker {
	long id, iters, acc;
	long data[8];
};

static pthread_barrier_t go;

__attribute__((noinline)) long traced(struct worker *w, long i)
{
	long x = w->data[i & 7] + w->id;
	w->data[(i + 1) & 7] = x ^ i;
	return x;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	pthread_barrier_wait(&go);
	for (long i = 0; i < w->iters; i++)
		w->acc += traced(w, i);
	return NULL;
}

int main(int argc, char **argv)
{
	static struct worker w[2];
	long iters = argc > 1 ? atol(argv[1]) : 20000;
	pthread_t t;

	for (int i = 0; i < 2; i++) {
		w[i].id = i + 1;
		w[i].iters = iters;
	}
	pthread_barrier_init(&go, NULL, 2);
	pthread_create(&t, NULL, run, &w[1]);
	run(&w[0]);
	pthread_join(t, NULL);
	printf("checksum %ld\n", w[0].acc * 3 + w[1].acc);
	return 0;
}
