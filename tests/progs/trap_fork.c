/* Children of a traced program that run the range's code themselves:
 *   fork:        the child calls `traced` N times, prints its result, exits
 *   vfork:       the child calls `traced` N times, then _exit(result & 0x7f)
 *   posix_spawn: runs this program again as "trap_fork child N", which calls
 *                `traced` N times and prints its result
 * The parent calls `traced` before and after each child and prints how each
 * child ended (a child killed by SIGSEGV shows as "signal 11").
 * `traced` sits alone on its page (section .text.trap_fork).
 * Usage: trap_fork [N [WHICH]]: WHICH a subset of "fvs" (default all).
 * Exit 0.  Range: `traced`. */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trap_page.h"

extern char **environ;

long traced(long *slot, long i);

TRAP_PAGE_TRACED(trap_fork);

static long run(long n, long seed)
{
	long slot[1] = {seed};
	long acc = 0;
	for (long i = 0; i < n; i++)
		acc += traced(slot, i);
	return acc;
}

static void ended(const char *who, int status)
{
	if (WIFEXITED(status))
		printf("%s: exit %d\n", who, WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		printf("%s: signal %d\n", who, WTERMSIG(status));
	else
		printf("%s: status 0x%x\n", who, status);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "child")) {
		printf("spawned child: %ld\n", run(atol(argv[2]), 7));
		return 0;
	}
	long n = argc > 1 ? atol(argv[1]) : 5;
	const char *which = argc > 2 ? argv[2] : "fvs";
	int status;
	pid_t pid;

	printf("parent: %ld\n", run(n, 1));
	fflush(stdout);
	if (strchr(which, 'f')) {
		pid = fork();
		if (pid == 0) {
			printf("fork child: %ld\n", run(n, 2));
			fflush(stdout);
			_exit(0);
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid)
			return 1;
		ended("fork child", status);
		printf("parent: %ld\n", run(n, 3));
		fflush(stdout);
	}
	if (strchr(which, 'v')) {
		pid = vfork();
		if (pid == 0)
			_exit((int)(run(n, 4) & 0x7f));
		if (pid < 0 || waitpid(pid, &status, 0) != pid)
			return 1;
		ended("vfork child", status);
		printf("parent: %ld\n", run(n, 5));
		fflush(stdout);
	}
	if (strchr(which, 's')) {
		char nbuf[32];
		snprintf(nbuf, sizeof(nbuf), "%ld", n);
		char *args[] = { argv[0], "child", nbuf, NULL };
		if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ))
			return 1;
		if (waitpid(pid, &status, 0) != pid)
			return 1;
		ended("spawned child", status);
		printf("parent: %ld\n", run(n, 6));
		fflush(stdout);
	}
	return 0;
}
