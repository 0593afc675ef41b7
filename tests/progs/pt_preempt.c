/* The patch trap and a handler that leaves its signal frame the way Go's
 * asynchronous preemption does (issue 32; docs/trace.md "The patch trap",
 * "Signals"): a 100 us SIGALRM whose handler does not return to the
 * interrupted instruction by rt_sigreturn but makes the thread call
 * `detour`, which returns to it later with a plain ret (the interrupted pc
 * pushed on the thread's stack, as Go's runtime makes the thread call
 * asyncPreempt).  `traced` is called in a loop; the instructions its
 * entry's 5 bytes cover (a mov and an add) are where a signal may stop the
 * thread in the cache: delivered at the original add, the detour would
 * return into the patch's jump.  Usage: pt_preempt N.  Prints a checksum
 * (which depends only on N) and exits 0.  Range: traced. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <ucontext.h>

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

static void on_alarm(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)si;
	ucontext_t *uc = ctx;
	greg_t *g = uc->uc_mcontext.gregs;
	g[REG_RSP] -= 8;
	*(greg_t *)g[REG_RSP] = g[REG_RIP];
	g[REG_RIP] = (greg_t)detour;
	detours++;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000000;
	struct sigaction sa = { .sa_sigaction = on_alarm, .sa_flags = SA_SIGINFO | SA_RESTART };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { { 0, 100 }, { 0, 100 } };
	setitimer(ITIMER_REAL, &it, NULL);
	unsigned long sum = 0;
	for (long i = 0; i < n; i++)
		sum = sum * 3 + (unsigned long)traced(i);
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	printf("%lx\n", sum);
	fprintf(stderr, "pt_preempt: %lu detours\n", detours);
	return 0;
}
