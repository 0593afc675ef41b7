/* The patch trap and a handler that leaves its signal frame the way Go's
 * asynchronous preemption does (issue 32; docs/trace.md "The patch trap",
 * "Signals"): a 100 us SIGALRM whose handler does not return to the
 * interrupted instruction by rt_sigreturn but makes the thread call
 * `detour`, which returns to it later with a plain ret (the interrupted pc
 * pushed on the thread's stack, as Go's runtime makes the thread call
 * asyncPreempt).  `traced` is called in a loop; the instructions its
 * entry's 5 bytes cover (a mov and an add) are where a signal may stop the
 * thread in the cache: delivered at the original add, the detour would
 * return into the patch's jump.  With THREADS > 1, each of that many
 * threads calls it N times under a timer of its own (SIGEV_THREAD_ID: a
 * signal to that thread, as Go's SIGURG goes to the thread that runs the
 * goroutine); US sets the timers' interval.  Usage: pt_preempt N [THREADS
 * [US]] (defaults 20000000, 1, 100).  Prints a checksum per thread (which
 * depends only on N) and exits 0 (2 on bad arguments).  Range: traced. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define MAXTHREADS 16

long traced(long x);
void detour(void);

__asm__(".text\n"
	".globl traced\n.type traced,@function\n"
	"traced:\n"
	"	mov %rdi, %rax\n"          /* 3 bytes ... */
	"	add $0x1234, %rax\n"       /* ... 6: the entry's patch covers both */
	"	imul $31, %rax, %rax\n"
	"	xor %rdi, %rax\n"
	"	rol $7, %rax\n"
	"	add $11, %rax\n"
	"	mov %rax, %rdx\n"
	"	shr $3, %rdx\n"
	"	xor %rdx, %rax\n"
	"	ret\n"
	".size traced,.-traced\n"
	/* Go's asyncPreempt in miniature: everything kept, back to the
	 * interrupted pc the handler pushed. */
	".globl detour\n.type detour,@function\n"
	"detour:\n"
	"	ret\n"
	".size detour,.-detour\n");

static volatile unsigned long detours;
static long calls = 20000000, interval_us = 100;
static unsigned long result[MAXTHREADS];

static void on_alarm(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)si;
	ucontext_t *uc = ctx;
	greg_t *g = uc->uc_mcontext.gregs;
	g[REG_RSP] -= 8;
	*(greg_t *)g[REG_RSP] = g[REG_RIP];
	g[REG_RIP] = (greg_t)detour;
	__atomic_add_fetch(&detours, 1, __ATOMIC_RELAXED);
}

static unsigned long loop(void)
{
	unsigned long sum = 0;
	for (long i = 0; i < calls; i++)
		sum = sum * 3 + (unsigned long)traced(i);
	return sum;
}

/* A thread with a timer of its own: SIGALRM to this thread every interval. */
static void *worker(void *arg)
{
	long id = (long)arg;
	struct sigevent sev = { .sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGALRM };
	sev._sigev_un._tid = gettid();
	timer_t t;
	struct itimerspec on = { { 0, interval_us * 1000 }, { 0, interval_us * 1000 } }, off = { 0 };
	if (timer_create(CLOCK_MONOTONIC, &sev, &t) || timer_settime(t, 0, &on, NULL))
		exit(3);
	result[id] = loop();
	timer_settime(t, 0, &off, NULL);
	timer_delete(t);
	return NULL;
}

int main(int argc, char **argv)
{
	int nthreads = argc > 2 ? atoi(argv[2]) : 1;
	if (argc > 1)
		calls = atol(argv[1]);
	if (argc > 3)
		interval_us = atol(argv[3]);
	if (nthreads < 1 || nthreads > MAXTHREADS || interval_us < 1 || interval_us >= 1000000)
		return 2;
	struct sigaction sa = { .sa_sigaction = on_alarm, .sa_flags = SA_SIGINFO | SA_RESTART };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	if (nthreads == 1) {
		struct itimerval it = { { 0, interval_us }, { 0, interval_us } };
		setitimer(ITIMER_REAL, &it, NULL);
		result[0] = loop();
		struct itimerval off = { { 0, 0 }, { 0, 0 } };
		setitimer(ITIMER_REAL, &off, NULL);
	} else {
		pthread_t t[MAXTHREADS];
		for (long i = 0; i < nthreads; i++)
			pthread_create(&t[i], NULL, worker, (void *)i);
		for (int i = 0; i < nthreads; i++)
			pthread_join(t[i], NULL);
	}
	for (int i = 0; i < nthreads; i++)
		printf("%lx\n", result[i]);
	fprintf(stderr, "pt_preempt: %lu detours\n", detours);
	return 0;
}
