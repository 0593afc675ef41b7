/* The baseline for gebpf's stepping rate: the simplest possible ptrace
 * single-step loop (PTRACE_SINGLESTEP + waitpid + PTRACE_GETREGS), on the
 * same program with the same pinning as gebpf (tracer and tracee on the
 * tracer's CPU).  Prints "steps seconds". */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: rawstep PROG [ARG...]\n");
		return 2;
	}
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	sched_setaffinity(0, sizeof(one), &one);
	pid_t pid = fork();
	if (pid == 0) {
		personality(ADDR_NO_RANDOMIZE);
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		execv(argv[1], argv + 1);
		_exit(127);
	}
	int st;
	waitpid(pid, &st, 0);
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	unsigned long long steps = 0;
	struct user_regs_struct r;
	for (;;) {
		if (ptrace(PTRACE_SINGLESTEP, pid, 0, 0))
			break;
		if (waitpid(pid, &st, 0) < 0 || !WIFSTOPPED(st))
			break;
		ptrace(PTRACE_GETREGS, pid, 0, &r);
		steps++;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%llu %.6f\n", steps, (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
	return 0;
}
