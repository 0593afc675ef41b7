/* Asynchronous signals while the range runs: KIDS children wait until the
 * parent has entered `spin` (its first instruction sets a flag in shared
 * memory), then exit one after the other (5 ms apart), so that KIDS
 * SIGCHLDs (default action: ignore) reach the parent while it loops in the
 * range.  `spin(N, flag)` runs 1 + 1 + 3N + 1 instructions and returns N.
 * Usage: async_sigchld [KIDS [N]] (defaults 4, 30000).  Prints N and how
 * many children exited 0; exit 0.  Range: `spin` (section
 * .text.async_sigchld, alone on its page). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

long spin(long n, volatile long *flag);

asm(".pushsection .text.async_sigchld,\"ax\",@progbits\n"
    "	.balign 4096\n"
    "	.globl spin\n"
    "	.type spin,@function\n"
    "spin:\n"
    "	movq $1,(%rsi)\n"
    "	xor %eax,%eax\n"
    "1:	add $1,%rax\n"
    "	cmp %rdi,%rax\n"
    "	jb 1b\n"
    "	ret\n"
    "	.size spin, .-spin\n"
    "	.balign 4096\n"
    ".popsection\n");

int main(int argc, char **argv)
{
	int kids = argc > 1 ? atoi(argv[1]) : 4;
	long n = argc > 2 ? atol(argv[2]) : 30000;
	volatile long *flag = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int status, ok = 0;

	if (flag == MAP_FAILED || n < 1)
		return 1;
	for (int i = 0; i < kids; i++) {
		pid_t p = fork();
		if (p < 0)
			return 1;
		if (p == 0) {
			while (!*flag)
				usleep(1000);
			usleep(5000 * (i + 1));
			_exit(0);
		}
	}
	long got = spin(n, flag);
	while (wait(&status) > 0)
		ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
	printf("spin %ld children %d\n", got, ok);
	return 0;
}
