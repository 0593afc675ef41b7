/* The page trap's hot-function job: a loop calls `traced` (11 instructions,
 * always the same ones, 2 reads and 3 writes) CALLS times; between two calls
 * it runs `filler`, 2*FILL+3 instructions of out-of-range work.  With the
 * defaults (10000 calls, FILL 5000) that is ~1e8 instructions, of which
 * 110,000 are in the range.
 *
 * `traced` sits alone on its own page (section .text.trap_hot, page aligned
 * and padded to a page), so a trace of it steps nothing else, except
 * `neighbour`: out of the range but on the same page, called NEIGH times per
 * iteration (default 0) to exercise "code sharing a page with the range".
 *
 * Usage: trap_hot [CALLS [FILL [NEIGH]]].  Prints a checksum that depends
 * only on the arguments; exit 0.  Range: `traced`. */
#include <stdio.h>
#include <stdlib.h>

long traced(long *slot, long i);
long neighbour(long *slot, long i);
void filler(long n);

#define TRACED_LEN 11 /* instructions per call of traced (tests rely on it) */

asm(".pushsection .text.trap_hot,\"ax\",@progbits\n"
    "	.balign 4096\n"
    "	.globl traced\n"
    "	.type traced,@function\n"
    "traced:\n"
    "	mov (%rdi), %rax\n"          /* read 8 */
    "	imul $31, %rax, %rax\n"
    "	add %rsi, %rax\n"
    "	mov %rax, (%rdi)\n"          /* write 8 */
    "	push %rbx\n"                 /* write 8 (stack) */
    "	mov %rsi, %rbx\n"
    "	xor %rax, %rbx\n"
    "	mov %ebx, 8(%rdi)\n"         /* write 4 */
    "	pop %rbx\n"                  /* read 8 (stack) */
    "	and $0xffff, %rax\n"
    "	ret\n"                       /* read 8 (stack) */
    "	.size traced, .-traced\n"
    "	.globl neighbour\n"
    "	.type neighbour,@function\n"
    "neighbour:\n"
    "	mov 16(%rdi), %rax\n"
    "	add %rsi, %rax\n"
    "	mov %rax, 16(%rdi)\n"
    "	ret\n"
    "	.size neighbour, .-neighbour\n"
    "	.balign 4096\n"
    ".popsection\n"
    "	.text\n"
    "	.globl filler\n"
    "	.type filler,@function\n"
    "filler:\n"
    "	mov %rdi, %rcx\n"
    "1:	dec %rcx\n"
    "	jnz 1b\n"
    "	ret\n"
    "	.size filler, .-filler\n");

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 10000;
	long fill = argc > 2 ? atol(argv[2]) : 5000;
	long neigh = argc > 3 ? atol(argv[3]) : 0;
	static long slot[3] = {1, 0, 0};
	unsigned long sum = 0;

	for (long i = 0; i < calls; i++) {
		if (fill > 0)
			filler(fill);
		for (long k = 0; k < neigh; k++)
			neighbour(slot, k);
		sum += (unsigned long)traced(slot, i);
	}
	printf("calls %ld len %d sum %lu slot %ld %ld %ld\n", calls, TRACED_LEN, sum, slot[0],
	       slot[1], slot[2]);
	return 0;
}
