/* faults_pages: touch N fresh pages, one write each, inside touch_pages().
 *
 *   faults_pages [N] [--rounds R] [--gate | --sync]
 *
 * Prints one JSON line when done:
 *   {"pid":P,"base":"0x..","pages":N,"t0":NS,"t1":NS,"minflt":M,"majflt":J}
 * t0/t1 are CLOCK_MONOTONIC ns around the touching span (the clock BPF's
 * bpf_ktime_get_ns reads); minflt/majflt are getrusage deltas over the same
 * span.  Page i is written at base + i*4096 + (i%8)*8 (the expected fault
 * address).  Everything the span runs (vDSO, getrusage, touch_pages) is
 * warmed up first, so the span's only user-mode faults are the N touches.
 * --rounds R: unmap and repeat R times (a fault-heavy load for benchmarks;
 * the line then reports the last round's span, and "total_ns" the time of
 * all rounds).
 * --gate: read one byte from stdin before starting (a test attaches first).
 * --sync: the gate, then after each touch
 * write one byte to stdout and wait for one byte on stdin, so a test can
 * check faults page by page.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096

static int sync_mode, gate_mode;

static void handshake(void)
{
	char c = 'x';
	if (write(1, &c, 1) != 1 || read(0, &c, 1) != 1)
		_exit(3);
}

__attribute__((noinline)) void touch_pages(volatile char *base, long n)
{
	for (long i = 0; i < n; i++) {
		base[i * PAGE + (i % 8) * 8] = 1;
		if (sync_mode)
			handshake();
	}
}

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = 64, rounds = 1;
	struct rusage r0, r1;
	long long t0 = 0, t1 = 0, tstart;
	char *base = NULL;
	char gate;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--sync"))
			sync_mode = gate_mode = 1;
		else if (!strcmp(argv[i], "--gate"))
			gate_mode = 1;
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atol(argv[++i]);
		else
			n = atol(argv[i]);
	}
	if (n <= 0 || rounds <= 0)
		return 2;

	/* Warm up everything the span uses. */
	memset(&r0, 0, sizeof(r0));
	memset(&r1, 0, sizeof(r1));
	getrusage(RUSAGE_SELF, &r0);
	getrusage(RUSAGE_SELF, &r1);
	t0 = now_ns();
	touch_pages(NULL, 0);
	if (gate_mode && read(0, &gate, 1) != 1)
		return 3;

	tstart = now_ns();
	for (long r = 0; r < rounds; r++) {
		if (base)
			munmap(base, (size_t)n * PAGE);
		base = mmap(NULL, (size_t)n * PAGE, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (base == MAP_FAILED)
			return 1;
		/* One fault per page: no transparent huge page. */
		madvise(base, (size_t)n * PAGE, MADV_NOHUGEPAGE);

		t0 = now_ns();
		getrusage(RUSAGE_SELF, &r0);
		touch_pages(base, n);
		getrusage(RUSAGE_SELF, &r1);
		t1 = now_ns();
	}
	printf("{\"pid\":%d,\"base\":\"%#lx\",\"pages\":%ld,\"t0\":%lld,\"t1\":%lld,"
	       "\"minflt\":%ld,\"majflt\":%ld,\"total_ns\":%lld}\n", getpid(), (unsigned long)base,
	       n, t0, t1, r1.ru_minflt - r0.ru_minflt, r1.ru_majflt - r0.ru_majflt, now_ns() - tstart);
	return 0;
}
