/* Four threads loop calling `mix`, which shares its page with their loop
 * (the page trap, with the range on `mix`, traps the caller's page too: the
 * return address of `call mix` is on a trapped page).  Each thread checks
 * every result against the same formula computed inline and aborts on a
 * mismatch.  The main thread answers each line on stdin with one line
 * "beat N0 N1 N2 N3" (calls per thread so far); EOF ends the program, exit 0.
 * Prints "ready" once every thread is running.  Range: `mix`.
 *
 * The threads are paced: a burst of calls for ~0.2 ms, then 0.8 ms asleep
 * (a fifth of a CPU each, thousands of calls a millisecond still): the
 * tests wait seconds on this program, and four threads flat out took every
 * cycle the tests beside them needed (docs/testing.md "Where the CPU
 * goes"). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define NT 4
static volatile unsigned long counts[NT];
static volatile int started;

#define BURST_NS 200000L
#define NAP_NS 800000L

static long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
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
	long burst = now_ns();
	const struct timespec nap = {0, NAP_NS};
	__atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		/* (at least 256 calls between two looks at the clock: traced
		 * whole, a look alone can take longer than a burst) */
		if ((i & 255) == 255 && now_ns() - burst > BURST_NS) {
			nanosleep(&nap, NULL);
			burst = now_ns();
		}
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

int main(void)
{
	pthread_t th[NT];
	char line[64];
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
