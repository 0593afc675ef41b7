/* A busy target for the tests that kill gebpf snap mid-capture
 * (tests/e2e/test_snap_kill.py).
 *
 *   snap_busy MIB LOG
 *
 * Touches MIB of memory (one 64-bit word per page, starting at the page's
 * index), then works for ever: round r adds r to every page's word.  A
 * SIGUSR1 handler appends "usr1 PID" to LOG (so a second running instance,
 * a copy of this process, shows in the log under its own pid).  Each line
 * read from stdin makes it finish the round in progress and check every
 * word against what the rounds done so far must have made of it: it prints
 * "ok ROUNDS" or "bad PAGE GOT WANT", then goes on.  Exits at end of input.
 * MIBp paces it: after each millisecond of rounds, a millisecond asleep (half
 * a CPU; an attach finds it running or in its nanosleep about as often);
 * MIBpN, N milliseconds asleep (MIBp4: a fifth of a CPU).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096

static int log_fd = -1;
static uint8_t *mem;
static size_t npages;
static volatile int check_wanted, quit;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void on_usr1(int sig)
{
	char line[64];
	(void)sig;
	int n = snprintf(line, sizeof(line), "usr1 %d\n", (int)getpid());
	if (write(log_fd, line, (size_t)n) < 0)
		_exit(3);
}

/* Reads stdin; each line asks the worker for a check. */
static void *reader(void *arg)
{
	char buf[256];
	(void)arg;
	while (fgets(buf, sizeof(buf), stdin)) {
		pthread_mutex_lock(&mu);
		check_wanted = 1;
		while (check_wanted)
			pthread_cond_wait(&cv, &mu);
		pthread_mutex_unlock(&mu);
	}
	quit = 1;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	char *end;
	size_t mib = strtoul(argv[1], &end, 0);
	int paced = *end == 'p';
	long nap_ms = paced && end[1] ? strtol(end + 1, NULL, 10) : 1;
	log_fd = open(argv[2], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	npages = mib * 1024 * 1024 / PAGE;
	mem = mmap(NULL, npages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (log_fd < 0 || mem == MAP_FAILED)
		return 1;
	for (size_t i = 0; i < npages; i++)
		*(uint64_t *)(mem + i * PAGE) = i;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	pthread_t th;
	if (pthread_create(&th, NULL, reader, NULL))
		return 1;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	uint64_t rounds = 0, added = 0;
	struct timespec burst, now;
	const struct timespec nap = { nap_ms / 1000, nap_ms % 1000 * 1000000L };
	clock_gettime(CLOCK_MONOTONIC, &burst);
	while (!quit) {
		rounds++;
		for (size_t i = 0; i < npages; i++)
			*(volatile uint64_t *)(mem + i * PAGE) += rounds;
		added += rounds;
		if (paced) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if ((now.tv_sec - burst.tv_sec) * 1000000000L + now.tv_nsec - burst.tv_nsec > 1000000L) {
				nanosleep(&nap, NULL);
				clock_gettime(CLOCK_MONOTONIC, &burst);
			}
		}
		if (!check_wanted)
			continue;
		size_t bad = npages;
		for (size_t i = 0; i < npages && bad == npages; i++)
			if (*(uint64_t *)(mem + i * PAGE) != i + added)
				bad = i;
		if (bad == npages)
			printf("ok %llu\n", (unsigned long long)rounds);
		else
			printf("bad %zu %llu %llu\n", bad, (unsigned long long)*(uint64_t *)(mem + bad * PAGE),
			       (unsigned long long)(bad + added));
		fflush(stdout);
		pthread_mutex_lock(&mu);
		check_wanted = 0;
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
	}
	return 0;
}
