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
 * "checksum N" at the end, which depends only on R (-1: a child went wrong).
 * Usage: jit_forks [R] (default 100).  Exit 0.  Range: `traced_forks`. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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
    "9:	mov %r12,%rax\n"
    "	add $24,%rsp\n"
    "	pop %r12\n"
    "	pop %rbx\n"
    "	ret\n"
    "	.size traced_forks, .-traced_forks\n"
    ".popsection\n");

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 100;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	printf("checksum %ld\n", traced_forks(rounds));
	return 0;
}
