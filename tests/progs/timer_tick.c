/* A program with a fast timer whose handler runs outside the range (a
 * profiler's tick, a runtime's preemption signal), calling a function of
 * about 14,000 instructions now and then (issue 23, case 1).
 *
 * Usage: timer_tick SECS [itimer|posix|none [PERIOD_US [EVERY]]]
 *        timer_tick calls=N
 * The first form works for SECS seconds of wall time: units of work outside
 * the range (about 0.1 ms each), and a call of `tick_work` (the range) every
 * EVERY units (default 20000); meanwhile SIGALRM comes every PERIOD_US
 * microseconds (default 1000) from setitimer(ITIMER_REAL) ("itimer", the
 * default) or timer_create(SIGEV_SIGNAL) with an SA_SIGINFO handler
 * ("posix"), and the handler works too (a few hundred instructions;
 * "nested": as "itimer", and every 200th tick the handler calls tick_work
 * itself).  It
 * prints "units U calls C ticks T checksum X".  The second form makes N
 * calls, no timer, and prints "checksum X": the checksum of C calls.
 * `tick_work`'s path does not depend on its argument or on the handler. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static volatile unsigned long ticks, hwork;

/* tick_work(x): 1750 rounds of x = x * 6364136223846793005 + k; x ^= x >> 29
 * (14,004 instructions), alone on its page (the page trap steps whatever
 * shares the range's pages). */
unsigned long tick_work(unsigned long x);
__asm__(".text\n.balign 4096\n"
	".globl tick_work\n.type tick_work,@function\n"
	"tick_work:\n"
	"	xor %ecx, %ecx\n"
	"	movabs $6364136223846793005, %rdx\n"
	"1:	imul %rdx, %rdi\n"
	"	add %rcx, %rdi\n"
	"	mov %rdi, %rax\n"
	"	shr $29, %rax\n"
	"	xor %rax, %rdi\n"
	"	inc %ecx\n"
	"	cmp $1750, %ecx\n"
	"	jne 1b\n"
	"	mov %rdi, %rax\n"
	"	ret\n"
	".size tick_work,.-tick_work\n"
	".balign 4096\n");

/* The handler's work: out of the range. */
static int nested; /* "nested": every 200th tick the handler calls tick_work */

static void handler_work(void)
{
	unsigned long h = hwork;
	if (nested && ticks % 200 == 199)
		h += tick_work(ticks);
	for (int k = 0; k < 100; k++)
		h = (h ^ (unsigned long)k) * 1099511628211ul;
	hwork = h;
	ticks++;
}

static void on_alarm(int sig) { (void)sig; handler_work(); }
static void on_alarm_info(int sig, siginfo_t *si, void *uc)
{
	(void)sig; (void)si; (void)uc;
	handler_work();
}

static volatile unsigned long sink;

__attribute__((noinline)) static void unit(void)
{
	unsigned long s = sink;
	for (int k = 0; k < 20000; k++)
		s = s * 33 + (unsigned long)k;
	sink = s;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static unsigned long mix(unsigned long sum, long i) { return sum * 31 + tick_work((unsigned long)i); }

int main(int argc, char **argv)
{
	if (argc > 1 && !strncmp(argv[1], "calls=", 6)) {
		long n = atol(argv[1] + 6);
		unsigned long sum = 0;
		for (long i = 0; i < n; i++)
			sum = mix(sum, i);
		printf("checksum %lx\n", sum);
		return 0;
	}
	double secs = argc > 1 ? atof(argv[1]) : 4;
	const char *mode = argc > 2 ? argv[2] : "itimer";
	long period = argc > 3 ? atol(argv[3]) : 1000, every = argc > 4 ? atol(argv[4]) : 20000;
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	nested = !strcmp(mode, "nested");
	if (nested)
		mode = "itimer";
	if (!strcmp(mode, "posix")) {
		sa.sa_sigaction = on_alarm_info;
		sa.sa_flags |= SA_SIGINFO;
	}
	sigaction(SIGALRM, &sa, NULL);
	if (!strcmp(mode, "itimer")) {
		struct itimerval it = { { 0, period }, { 0, period } };
		setitimer(ITIMER_REAL, &it, NULL);
	} else if (!strcmp(mode, "posix")) {
		struct sigevent ev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGALRM };
		timer_t t;
		struct itimerspec its = { { 0, period * 1000 }, { 0, period * 1000 } };
		if (timer_create(CLOCK_MONOTONIC, &ev, &t) || timer_settime(t, 0, &its, NULL)) {
			perror("timer_create");
			return 1;
		}
	}
	unsigned long sum = 0;
	long units = 0, calls = 0;
	double end = now_s() + secs;
	while (now_s() < end) {
		unit();
		if (++units % every == 0)
			sum = mix(sum, calls++);
	}
	printf("units %ld calls %ld ticks %lu checksum %lx\n", units, calls, (unsigned long)ticks, sum);
	return 0;
}
