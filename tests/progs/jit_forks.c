/* A range that forks and vforks over and over, its system calls its own, for
 * the translating engine's end: `traced_forks(R)` runs R rounds; each round
 * spins a little loop, then makes the fork (even rounds) or vfork (odd
 * rounds) system call itself, and waits for the child with its own wait4:
 * so the program's one thread spends much of its time in a system call
 * made from the range (stepped: the translating engine leaves system calls
 * to the step engine), and the rest in translated code.  The fork child
 * exits 3 at once, the vfork child 5 (both with exit_group from the range,
 * touching no memory); the checksum adds the loop's sums and the children's
 * exit statuses.  main prints "ready PID" first (stdout flushed) and
 * "checksum N left L" at the end: L is 0 after the R rounds, and N depends
 * only on R and L (-1: a child went wrong).  SIGUSR1 (SA_RESTART: the wait4
 * goes on) ends the rounds early, at the next round's start: a round k
 * (R down to 1, k rounds left) adds 2015000 (the loop) and 3 (k even: fork)
 * or 5 (k odd: vfork), so a test that stops a traced run once gebpf is gone
 * knows its checksum without running the rest (tests/e2e/test_attach_forks.py
 * forks_checksum).  Usage: jit_forks [R] (default 100).  Exit 0.  Range:
 * `traced_forks`. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile sig_atomic_t jit_forks_stop;   /* read by the range each round */
long jit_forks_left;                    /* rounds left at its end */

long traced_forks(long rounds);
asm(".pushsection .text.jit_forks,\"ax\",@progbits\n"
    "	.globl traced_forks\n"
    "	.type traced_forks,@function\n"
    "traced_forks:\n"
    "	push %rbx\n"
    "	push %r12\n"
    "	mov %rdi,%rbx\n"        /* rounds left */
    "	xor %r12d,%r12d\n"      /* checksum */
    "	sub $24,%rsp\n"         /* (aligned) the status word */
    "0:	test %rbx,%rbx\n"
    "	jz 9f\n"
    "	cmpl $0,jit_forks_stop(%rip)\n"  /* SIGUSR1: stop here */
    "	jne 9f\n"
    "	mov $2000,%ecx\n"       /* a little work in translated code */
    "1:	lea 7(%r12,%rcx),%r12\n"
    "	dec %ecx\n"
    "	jnz 1b\n"
    "	mov $57,%eax\n"         /* fork */
    "	test $1,%bl\n"
    "	jz 2f\n"
    "	mov $58,%eax\n"         /* vfork */
    "2:	syscall\n"
    "	test %rax,%rax\n"
    "	js 8f\n"
    "	jnz 3f\n"
    "	mov %ebx,%edi\n"        /* the child: exit_group(3 or 5) */
    "	and $1,%edi\n"
    "	lea 3(%rdi,%rdi),%edi\n"
    "	mov $231,%eax\n"
    "	syscall\n"
    "	hlt\n"
    "3:	mov %rax,%rdi\n"        /* wait4(pid, &status, 0, NULL) */
    "	mov %rsp,%rsi\n"
    "	xor %edx,%edx\n"
    "	xor %r10d,%r10d\n"
    "	mov $61,%eax\n"
    "	syscall\n"
    "	cmp %rax,%rdi\n"
    "	jne 8f\n"
    "	mov (%rsp),%eax\n"
    "	test $0x7f,%al\n"       /* exited */
    "	jnz 8f\n"
    "	shr $8,%eax\n"
    "	movzbl %al,%eax\n"
    "	add %rax,%r12\n"
    "	dec %rbx\n"
    "	jmp 0b\n"
    "8:	mov $-1,%r12\n"
    "9:	mov %rbx,jit_forks_left(%rip)\n"
    "	mov %r12,%rax\n"
    "	add $24,%rsp\n"
    "	pop %r12\n"
    "	pop %rbx\n"
    "	ret\n"
    "	.size traced_forks, .-traced_forks\n"
    ".popsection\n");

static void on_usr1(int sig)
{
	(void)sig;
	jit_forks_stop = 1;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 100;
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	long sum = traced_forks(rounds);
	printf("checksum %ld left %ld\n", sum, jit_forks_left);
	return 0;
}
