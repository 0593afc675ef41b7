/* Probe trap: signals whose handler (out of range) interrupts the range and
 * returns into its middle.  `traced` sends itself SIGUSR1 with an inline
 * tgkill syscall (the handler runs as the syscall returns, then sigreturn
 * resumes `traced` after the syscall instruction); with "timer", an
 * interval timer (SIGALRM every US microseconds, default 1000) also
 * interrupts it at arbitrary points.
 * The handlers only count; `traced` reads nothing they write, so its trace
 * does not depend on where the timer hits.  Usage: pt_sigmid [N [timer [US]]]
 * (default 50).  Prints a checksum; exit 0.  Range: `traced`. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

static volatile long usr1, alarms;

static void on_usr1(int sig) { usr1 += sig; }
static void on_alarm(int sig) { alarms += sig; }

__attribute__((noinline)) long traced(long i, long pid, long tid)
{
	volatile long acc = i;
	long ret;
	for (int k = 0; k < 40; k++)
		acc = acc * 5 + k;
	if (i % 5 == 0) {
		/* tgkill(pid, tid, SIGUSR1), inline so the signal arrives here */
		__asm__ volatile("syscall" : "=a"(ret)
				 : "0"((long)SYS_tgkill), "D"(pid), "S"(tid), "d"((long)SIGUSR1)
				 : "rcx", "r11", "memory");
		acc += ret;
	}
	for (int k = 0; k < 40; k++)
		acc = acc * 3 + k;
	return acc;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 50, sum = 0;
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_RESTART };
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	long us = argc > 3 ? atol(argv[3]) : 1000;
	struct itimerval it = { { us / 1000000, us % 1000000 }, { us / 1000000, us % 1000000 } };
	if (argc > 2 && !strcmp(argv[2], "timer"))
		setitimer(ITIMER_REAL, &it, NULL);
	long pid = getpid(), tid = syscall(SYS_gettid);
	for (long i = 0; i < n; i++)
		sum = sum * 7 + traced(i, pid, tid);
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	printf("checksum %lx usr1 %ld\n", (unsigned long)sum, usr1 / SIGUSR1);
	return 0;
}
