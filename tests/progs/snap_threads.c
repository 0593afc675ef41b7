/* Multi-threaded target for `gebpf snap -p` tests.  Usage: snap_threads [MS]
 * Threads: compute() (busy: a fixed amount of arithmetic), reader() (blocked
 * in read(2) on a pipe until main writes), catcher() (receives SIGUSR1 from
 * main one at a time; its handler spins, so it is often mid-signal), and
 * main, which prints "ready PID" and keeps signalling for MS milliseconds
 * (default 1500).  Everything it prints afterwards is independent of timing,
 * so a snapshot taken meanwhile must not change it.  Exit 0. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int pipefd[2];
static volatile sig_atomic_t handled;
static pthread_t catcher_thread;
static volatile int catcher_ready;
static volatile int stop;

static void on_usr1(int sig)
{
	volatile uint64_t spin = 0;
	for (int i = 0; i < 20000; i++)
		spin += (uint64_t)i * (uint64_t)sig;
	handled = handled + 1;
}

__attribute__((noinline)) uint64_t compute_step(uint64_t x)
{
	x ^= x << 13, x ^= x >> 7, x ^= x << 17;
	return x;
}

static void *compute(void *arg)
{
	uint64_t x = 88172645463325252ull;
	for (long i = 0; i < 300000000L; i++)
		x = compute_step(x);
	*(uint64_t *)arg = x;
	return NULL;
}

__attribute__((noinline)) static void *reader(void *arg)
{
	char c = 0;
	ssize_t n = read(pipefd[0], &c, 1);
	*(char *)arg = n == 1 ? c : '?';
	return NULL;
}

/* SIGUSR1 stays blocked except inside sigsuspend: no wake-up is lost. */
static void *catcher(void *arg)
{
	struct sigaction sa;
	sigset_t open_mask;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	pthread_sigmask(SIG_BLOCK, NULL, &open_mask);
	sigdelset(&open_mask, SIGUSR1);
	catcher_ready = 1;
	while (!stop)
		sigsuspend(&open_mask);
	return NULL;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long ms = argc > 1 ? atol(argv[1]) : 1500;
	uint64_t result = 0;
	char got = 0;
	pthread_t tc, tr;
	sigset_t set;

	/* Only the catcher takes SIGUSR1. */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (pipe(pipefd))
		return 1;
	pthread_create(&tc, NULL, compute, &result);
	pthread_create(&tr, NULL, reader, &got);
	pthread_create(&catcher_thread, NULL, catcher, NULL);
	while (!catcher_ready)
		usleep(1000);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);

	long sent = 0;
	double end = now() + ms / 1000.0;
	while (now() < end || sent < 50) {
		long before = handled;
		pthread_kill(catcher_thread, SIGUSR1);
		sent++;
		while (handled == before)
			usleep(100);
	}
	stop = 1;
	pthread_kill(catcher_thread, SIGUSR1);   /* wake it to see stop */
	sent++;
	if (write(pipefd[1], "R", 1) != 1)
		return 1;
	pthread_join(tc, NULL);
	pthread_join(tr, NULL);
	pthread_join(catcher_thread, NULL);
	printf("compute %llx\nreader %c\nsignals %s\n", (unsigned long long)result, got,
	       handled == sent ? "all handled" : "LOST");
	return handled == sent ? 0 : 1;
}
