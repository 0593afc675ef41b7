/* Four threads computing for resume tests: `gebpf snap -p` while they all
 * run, then `gebpf resume` must print what the uninterrupted run prints.
 * Each worker runs a fixed xorshift chain and adds its steps to a counter
 * under a mutex every 2^20 steps; main prints "ready PID" once all four
 * have started, joins them with pthread_join (which waits on the word the
 * kernel clears at a thread's exit, clear_child_tid) and prints the results.
 * Usage: resume_threads [MILLION_STEPS_PER_THREAD] (default 150).  Exit 0. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t steps_done;
static volatile int started;
static long steps;

__attribute__((noinline)) static uint64_t work(uint64_t x)
{
	for (long i = 1; i <= steps; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		if (!(i & ((1 << 20) - 1))) {
			pthread_mutex_lock(&lock);
			steps_done += 1 << 20;
			pthread_mutex_unlock(&lock);
		}
	}
	return x;
}

static void *worker(void *arg)
{
	__atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
	*(uint64_t *)arg = work(*(uint64_t *)arg);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[4];
	uint64_t x[4];
	steps = (argc > 1 ? atol(argv[1]) : 150) * 1000000L;
	for (int i = 0; i < 4; i++) {
		x[i] = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		pthread_create(&t[i], NULL, worker, &x[i]);
	}
	while (started < 4)
		usleep(100);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (int i = 0; i < 4; i++)
		if (pthread_join(t[i], NULL))
			return 1;
	for (int i = 0; i < 4; i++)
		printf("thread %d %016llx\n", i, (unsigned long long)x[i]);
	printf("steps %llu\n", (unsigned long long)steps_done);
	return 0;
}
