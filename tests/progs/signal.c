/* A signal handler in range: `traced` raises SIGUSR1; the kernel runs
 * `traced_handler` on a signal frame below the interrupted stack, then
 * `traced` continues.  Both functions live in section .text.gbrange, so
 * the test traces the span from the first to the last of them (a
 * START-END range).  Prints the result; exit 0. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile long hits;

__attribute__((noinline, section(".text.gbrange"))) void traced_handler(int sig)
{
	volatile long local[4] = {sig, 1, 2, 3};
	hits += local[0] + local[3];
}

__attribute__((noinline, section(".text.gbrange"))) long traced(int n)
{
	volatile long acc[2] = {0, 0};
	for (int i = 0; i < n; i++) {
		acc[0] += i;
		raise(SIGUSR1);
		acc[1] += hits;
	}
	return acc[0] + acc[1];
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = traced_handler;
	sigaction(SIGUSR1, &sa, NULL);
	printf("signal %ld\n", traced(3));
	return 0;
}
