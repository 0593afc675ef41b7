/* Four threads loop calling `mix`, which shares its page with their loop
 * (the page trap, with the range on `mix`, traps the caller's page too: the
 * return address of `call mix` is on a trapped page).  Each thread checks
 * every result against the same formula computed inline and aborts on a
 * mismatch.  The main thread answers each line on stdin with one line
 * "beat N0 N1 N2 N3" (calls per thread so far); EOF ends the program, exit 0.
 * Prints "ready" once every thread is running.  `trap_mix p` paces the
 * threads: after each millisecond of calls, a millisecond asleep (half a
 * CPU each; a moment finds about 15 of 16 times a thread on the page).
 * Range: `mix`. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define NT 4
static volatile unsigned long counts[NT];
static volatile int started;
static int paced;

/* Out of the page: a millisecond asleep once a millisecond has run. */
__attribute__((noinline)) static void pace(struct timespec *burst)
{
	struct timespec now;
	const struct timespec nap = { 0, 1000000 };
	clock_gettime(CLOCK_MONOTONIC, &now);
	if ((now.tv_sec - burst->tv_sec) * 1000000000L + now.tv_nsec - burst->tv_nsec > 1000000L) {
		nanosleep(&nap, NULL);
		clock_gettime(CLOCK_MONOTONIC, burst);
	}
}

/* mix and the loop, in this order, on one page (aligned section). */
__attribute__((noinline, used, section(".text.trap_mix"), aligned(4096)))
unsigned long mix(unsigned long a, unsigned long i)
{
	a ^= i * 0x9e3779b97f4a7c15ul;
	return (a << 7) | (a >> 57);
}

__attribute__((noinline, section(".text.trap_mix")))
static void *worker(void *arg)
{
	long k = (long)arg;
	unsigned long a = (unsigned long)k, i = 0;
	struct timespec burst;
	clock_gettime(CLOCK_MONOTONIC, &burst);
	__atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		if (paced && (i & 1023) == 0)
			pace(&burst);
		unsigned long b = a ^ (i * 0x9e3779b97f4a7c15ul);
		unsigned long want = (b << 7) | (b >> 57);
		a = mix(a, i);
		if (a != want)
			abort();
		i++;
		counts[k] = i;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[NT];
	char line[64];
	paced = argc > 1 && argv[1][0] == 'p';
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (long k = 0; k < NT; k++)
		pthread_create(&th[k], NULL, worker, (void *)k);
	while (started < NT)
		usleep(1000);
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin))
		printf("beat %lu %lu %lu %lu\n", counts[0], counts[1], counts[2], counts[3]);
	return 0;
}
