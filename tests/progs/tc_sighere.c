/* Signal handlers inside the range (tests/e2e/test_trap_cases.py, issue
 * 35: the reference exact under every trap).  traced(N) loops N times;
 * every 10th round a ud2, whose SIGILL handler traced_ill (SA_SIGINFO, in
 * the range) steps over it (RIP += 2): it returns into the range's middle,
 * not where it was raised; every 7th round raise(SIGUSR1), delivered on
 * the way out of libc's kill, to traced_usr, in the range too.  Both
 * handlers return through libc's restorer, off the range.  Prints a
 * checksum and the handlers' counts; exit 0.  Range: the span of traced,
 * traced_ill and traced_usr (their own section). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#define IN_RANGE __attribute__((noinline, section(".text.tc_sighere")))

static volatile long acc, ills, usrs;

IN_RANGE void traced_ill(int sig, siginfo_t *si, void *ucp)
{
	ucontext_t *uc = ucp;
	(void)si;
	uc->uc_mcontext.gregs[REG_RIP] += 2;
	ills++;
	acc += sig;
}

IN_RANGE void traced_usr(int sig)
{
	for (int i = 0; i < 4; i++)
		acc += sig * i;
	usrs++;
}

IN_RANGE long traced(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++) {
		s += i * 3 + acc;
		if (i % 10 == 5)
			__asm__ volatile("ud2");
		if (i % 7 == 3)
			raise(SIGUSR1);
	}
	return s;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 40;
	struct sigaction ill = { .sa_sigaction = traced_ill, .sa_flags = SA_SIGINFO };
	struct sigaction usr = { .sa_handler = traced_usr };
	sigemptyset(&ill.sa_mask);
	sigemptyset(&usr.sa_mask);
	if (sigaction(SIGILL, &ill, NULL) || sigaction(SIGUSR1, &usr, NULL))
		return 1;
	long r = traced(n);
	printf("%ld %ld %ld %ld\n", r, acc, ills, usrs);
	return 0;
}
