/* Memory shapes for gebpf snap's capture tests and benchmark.
 *
 *   snap_mem counter MIB     MIB of pages; a loop writes one counter value
 *                            into every page, then the next value, forever
 *   snap_mem regions         MADV_DONTFORK, MADV_WIPEONFORK and MAP_SHARED
 *                            pages with known bytes; a SIGCHLD handler
 *   snap_mem noreserve GIB   GIB of untouched MAP_NORESERVE memory, with
 *                            three pages touched (one holding only zeros)
 *   snap_mem stall MIB       MIB touched; a thread that wakes every 1 ms
 *                            measures its longest stall (the time beyond
 *                            1 ms between two wake-ups)
 *
 * Each prints "ready ADDR..." when set up, then on each line read from
 * stdin prints its report ("sigchld N children N" or "stall_us N") and
 * exits at end of input.  Addresses are printed in hex. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096

static volatile sig_atomic_t sigchld;
static volatile uint64_t max_gap_ns;
static uint8_t *mem;
static size_t mem_len;

static void on_chld(int sig)
{
	(void)sig;
	sigchld++;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *counter(void *arg)
{
	(void)arg;
	for (uint64_t v = 1;; v++)
		for (size_t o = 0; o < mem_len; o += PAGE)
			__atomic_store_n((uint64_t *)(mem + o), v, __ATOMIC_RELAXED);
	return NULL;
}

/* Wake every millisecond; a stall is the time beyond that between two
 * wake-ups (so the loop costs almost no CPU). */
static void *stall(void *arg)
{
	(void)arg;
	const struct timespec ms = { 0, 1000000 };
	uint64_t last = now_ns();
	for (;;) {
		nanosleep(&ms, NULL);
		uint64_t t = now_ns(), gap = t - last > 1000000 ? t - last - 1000000 : 0;
		if (gap > max_gap_ns)
			max_gap_ns = gap;
		last = t;
	}
	return NULL;
}

static uint8_t *map(size_t len, int flags)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return p;
}

int main(int argc, char **argv)
{
	pthread_t th;
	char line[64];
	if (argc < 2)
		return 2;
	const char *mode = argv[1];
	uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 0) : 1;
	if (!strcmp(mode, "counter")) {
		mem_len = n << 20;
		mem = map(mem_len, MAP_PRIVATE | MAP_ANONYMOUS);
		memset(mem, 0, mem_len);
		pthread_create(&th, NULL, counter, NULL);
		printf("ready %p %zu\n", (void *)mem, mem_len);
	} else if (!strcmp(mode, "regions")) {
		struct sigaction sa = { .sa_handler = on_chld };
		sigaction(SIGCHLD, &sa, NULL);
		uint8_t *dc = map(4 * PAGE, MAP_PRIVATE | MAP_ANONYMOUS);
		uint8_t *wf = map(4 * PAGE, MAP_PRIVATE | MAP_ANONYMOUS);
		uint8_t *sh = map(4 * PAGE, MAP_SHARED | MAP_ANONYMOUS);
		if (madvise(dc, 4 * PAGE, MADV_DONTFORK) || madvise(wf, 4 * PAGE, MADV_WIPEONFORK)) {
			perror("madvise");
			return 1;
		}
		/* The last page of each stays zero (a hole in gebpf's scratch file). */
		memset(dc, 0xdc, 3 * PAGE);
		memset(wf, 0x3f, 3 * PAGE);
		memset(sh, 0x5a, 3 * PAGE);
		printf("ready %p %p %p\n", (void *)dc, (void *)wf, (void *)sh);
	} else if (!strcmp(mode, "noreserve")) {
		mem_len = n << 30;
		mem = map(mem_len, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
		memcpy(mem, "first page", 10);
		memcpy(mem + mem_len / 2, "middle page", 11);
		/* A page that is populated and holds only zeros. */
		__atomic_store_n((volatile uint64_t *)(mem + mem_len - PAGE), 0, __ATOMIC_SEQ_CST);
		*(volatile uint8_t *)(mem + mem_len - PAGE) = 1;
		*(volatile uint8_t *)(mem + mem_len - PAGE) = 0;
		printf("ready %p %zu\n", (void *)mem, mem_len);
	} else if (!strcmp(mode, "stall")) {
		mem_len = n << 20;
		mem = map(mem_len, MAP_PRIVATE | MAP_ANONYMOUS);
		for (size_t o = 0; o < mem_len; o += 8)
			*(uint64_t *)(mem + o) = o * 0x9e3779b97f4a7c15ull;
		pthread_create(&th, NULL, stall, NULL);
		printf("ready %p %zu\n", (void *)mem, mem_len);
	} else {
		return 2;
	}
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (!strcmp(mode, "stall")) {
			printf("stall_us %llu\n", (unsigned long long)(max_gap_ns / 1000));
			max_gap_ns = 0;
		} else {
			int children = 0;
			while (waitpid(-1, NULL, WNOHANG | __WALL) > 0)
				children++;
			printf("sigchld %d children %d\n", (int)sigchld, children);
		}
		fflush(stdout);
	}
	return 0;
}
