/* Probe trap: entry instructions that can show the kernel's out-of-line
 * step to the program.  Each range is one function whose first instruction
 * is the probed one:
 *   pf_pushf  pushfq first, then branches on the pushed TF (bit 8): 0 on
 *             hardware, 1 if the probe's single-step leaked into it;
 *   pf_lea    lea of rip: returns its own address + 7;
 *   pf_call   call first: returns the address it pushed;
 *   pf_load   a RIP-relative load first: returns pf_word.
 * main prints each result relative to the function's address (the same
 * natively and traced, whatever the trap).  Usage: pt_pushf [N] (default
 * 20).  Exit 0.  Ranges: pf_pushf, pf_lea, pf_call, pf_load. */
#include <stdio.h>
#include <stdlib.h>

long pf_pushf(void), pf_lea(void), pf_call(void), pf_load(void);
long pf_word = 0x1234;

__asm__(".text\n"
	".globl pf_pushf\n.type pf_pushf,@function\n"
	"pf_pushf:\n"
	"	pushfq\n"
	"	pop %rax\n"
	"	test $0x100, %eax\n"
	"	jnz 1f\n"
	"	xor %eax, %eax\n"
	"	ret\n"
	"1:	mov $1, %eax\n"
	"	ret\n"
	".size pf_pushf,.-pf_pushf\n"
	".globl pf_lea\n.type pf_lea,@function\n"
	"pf_lea:\n"
	"	lea 0(%rip), %rax\n"
	"	ret\n"
	".size pf_lea,.-pf_lea\n"
	".globl pf_call\n.type pf_call,@function\n"
	"pf_call:\n"
	"	call 2f\n"
	"2:	pop %rax\n"
	"	ret\n"
	".size pf_call,.-pf_call\n"
	".globl pf_load\n.type pf_load,@function\n"
	"pf_load:\n"
	"	mov pf_word(%rip), %rax\n"
	"	ret\n"
	".size pf_load,.-pf_load\n");

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20;
	long tf = 0, lea = 0, call = 0, load = 0;
	for (long i = 0; i < n; i++) {
		tf += pf_pushf();
		lea += pf_lea() - (long)pf_lea;
		call += pf_call() - (long)pf_call;
		load += pf_load();
	}
	printf("pushf tf %ld lea %ld call %ld load %ld\n", tf, lea, call, load);
	return 0;
}
