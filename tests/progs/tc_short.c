/* An entry whose first 5 bytes hold other entries (where a 5-byte patch
 * cannot go): `traced` begins with two 2-byte instructions; `ts_in2`, 2
 * bytes in, is the target of a jump from `via_in2` (outside), and `ts_in4`,
 * 4 bytes in, of a jump from `via_in4` (outside); main calls all three.
 * Assembly in C (the exact bytes matter).  Usage: tc_short [N] (default
 * 20).  Prints a checksum; exit 0.  Range: `traced`. */
#include <stdio.h>
#include <stdlib.h>

long traced(long x), via_in2(long x), via_in4(long x);

__asm__(".text\n"
	".globl traced\n.type traced,@function\n"
	"traced:\n"
	"	xor %eax, %eax\n"          /* 31 c0 */
	".globl ts_in2\nts_in2:\n"
	"	add %edi, %eax\n"          /* 01 f8 */
	".globl ts_in4\nts_in4:\n"
	"	lea 1(%rax,%rax,2), %rax\n"
	"	xor $0x5a, %rax\n"
	"	ret\n"
	".size traced,.-traced\n"
	".globl via_in2\n.type via_in2,@function\n"
	"via_in2:\n"
	"	mov $7, %eax\n"
	"	jmp ts_in2\n"
	".size via_in2,.-via_in2\n"
	".globl via_in4\n.type via_in4,@function\n"
	"via_in4:\n"
	"	lea 3(%rdi), %rax\n"
	"	jmp ts_in4\n"
	".size via_in4,.-via_in4\n");

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20;
	unsigned long sum = 0;
	for (long i = 0; i < n; i++)
		sum = sum * 7 + (unsigned long)(traced(i) + via_in2(i) * 3 + via_in4(i) * 5);
	printf("checksum %lx\n", sum);
	return 0;
}
