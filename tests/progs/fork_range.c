/* A range that starts children itself: `traced_fork(K)` calls fork() (K=0),
 * vfork() (K=1) or posix_spawn() through spawn_child() (K=2), all outside
 * the range, and continues in the range after the call returns: the
 * instruction right after each call is `test %eax,%eax` (the first in-range
 * instruction after the child starts).
 *   fork:  the child takes the in-range branch to fork_child(), which prints
 *          "fork child" and exits 3;
 *   vfork: the child takes the in-range branch to vfork_child(), which
 *          _exits 5 (nothing else: memory is shared with the parent);
 *   spawn: the child is this program run again as "fork_range child", which
 *          prints "spawned child" and exits 7.
 * The parent (traced_fork returns the child's pid, or -1) waits for the
 * child and prints how it ended, then calls `traced_fork` for the next kind.
 * Usage: fork_range [KINDS [block]]: KINDS a string of digits 0-2 (default
 * "012"); with "block", SIGCHLD is blocked (never delivered: waitpid still
 * reaps), so that no asynchronous signal reaches the parent in the range.
 * Exit 0; 1 on an error.  Range: `traced_fork` (section .text.fork_range,
 * alone on its page). */
#define _GNU_SOURCE
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
long traced_fork(long kind);
void fork_child(void), vfork_child(void);
long spawn_child(void);

asm(".pushsection .text.fork_range,\"ax\",@progbits\n"
    "	.balign 4096\n"
    "	.globl traced_fork\n"
    "	.type traced_fork,@function\n"
    "traced_fork:\n"
    "	push %rbx\n"
    "	mov %rdi,%rbx\n"
    "	cmp $1,%rdi\n"
    "	je 1f\n"
    "	jg 2f\n"
    "	call fork\n"
    "	test %eax,%eax\n"
    "	jz 3f\n"
    "	jmp 9f\n"
    "1:	call vfork\n"
    "	test %eax,%eax\n"
    "	jz 4f\n"
    "	jmp 9f\n"
    "2:	call spawn_child\n"
    "	test %eax,%eax\n"
    "	jmp 9f\n"
    "3:	call fork_child\n"
    "4:	call vfork_child\n"
    "9:	movslq %eax,%rax\n"
    "	pop %rbx\n"
    "	ret\n"
    "	.size traced_fork, .-traced_fork\n"
    "	.balign 4096\n"
    ".popsection\n");

static char *self;

void fork_child(void)
{
	printf("fork child\n");
	fflush(stdout);
	_exit(3);
}

void vfork_child(void)
{
	_exit(5);
}

long spawn_child(void)
{
	pid_t pid;
	char *args[] = { self, "child", NULL };
	if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ))
		return -1;
	return pid;
}

int main(int argc, char **argv)
{
	static const char *names[] = { "fork", "vfork", "spawn" };
	const char *kinds = argc > 1 ? argv[1] : "012";
	int status;

	if (argc > 1 && !strcmp(argv[1], "child")) {
		printf("spawned child\n");
		return 7;
	}
	self = argv[0];
	if (argc > 2 && !strcmp(argv[2], "block")) {
		sigset_t chld;
		sigemptyset(&chld);
		sigaddset(&chld, SIGCHLD);
		if (sigprocmask(SIG_BLOCK, &chld, NULL))
			return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (const char *k = kinds; *k; k++) {
		if (*k < '0' || *k > '2')
			return 1;
		long pid = traced_fork(*k - '0');
		if (pid <= 0 || waitpid((pid_t)pid, &status, 0) != pid)
			return 1;
		if (WIFEXITED(status))
			printf("%s: child exit %d\n", names[*k - '0'], WEXITSTATUS(status));
		else
			printf("%s: child status 0x%x\n", names[*k - '0'], status);
	}
	return 0;
}
