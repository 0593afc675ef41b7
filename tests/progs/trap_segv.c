/* A program with its own SIGSEGV handler that recovers with siglongjmp from
 * real faults of its own, ROUNDS times (default 3) each:
 *   - a write to a PROT_READ page, by the FIRST instruction of `traced`
 *     (SEGV_ACCERR, si_addr = the data address);
 *   - a null-pointer read in `traced_null` (SEGV_MAPERR, si_addr 0);
 *   - a call into a page of its own that is readable but not executable
 *     (SEGV_ACCERR with si_addr == rip: what the page trap's own faults look
 *     like, on a page that is not the range's).
 * Between faults it calls `calm` (never faults).  The three functions sit
 * together on one page (section .text.trap_segv), `calm` first.
 * Usage: trap_segv [ROUNDS].  Prints what each fault looked like (addresses
 * relative to the page concerned) and a checksum; exit 0.
 * Ranges: `traced` (holds the faulting write), `calm` (no fault in it), or
 * the span of both. */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "trap_page.h"

long calm(long *slot, long i);
long traced(long *p, long v);
long traced_null(long *p);

asm(".pushsection .text.trap_segv,\"ax\",@progbits\n"
    "	.balign 4096\n"
    "	.globl calm\n"
    "	.type calm,@function\n"
    "calm:\n"
    "	mov (%rdi), %rax\n"
    "	imul $31, %rax, %rax\n"
    "	add %rsi, %rax\n"
    "	mov %rax, (%rdi)\n"
    "	ret\n"
    "	.size calm, .-calm\n"
    "	.globl traced\n"
    "	.type traced,@function\n"
    "traced:\n"
    "	mov %rsi, (%rdi)\n"        /* faults on a PROT_READ page */
    "	lea 1(%rsi), %rax\n"
    "	ret\n"
    "	.size traced, .-traced\n"
    "	.globl traced_null\n"
    "	.type traced_null,@function\n"
    "traced_null:\n"
    "	xor %eax, %eax\n"
    "	add (%rdi), %rax\n"        /* faults on NULL */
    "	ret\n"
    "	.size traced_null, .-traced_null\n"
    "	.balign 4096\n"
    ".popsection\n");

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 3;
	static long slot[1] = {5};
	unsigned long sum = 0;
	if (catch_segv())
		return 1;
	char *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned char *nx = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ro == MAP_FAILED || nx == MAP_FAILED)
		return 1;
	nx[0] = 0xc3; /* ret: would run if the page were executable */
	if (mprotect(nx, 4096, PROT_READ))
		return 1;
	long (*nxfn)(void) = (long (*)(void))(void *)nx;

	for (long r = 0; r < rounds; r++) {
		sum += (unsigned long)calm(slot, r);
		if (!sigsetjmp(jb, 1)) {
			sum += (unsigned long)traced((long *)(ro + 8 * r), r);
			printf("round %ld: write did not fault\n", r);
		} else {
			printf("round %ld: write fault code %d at ro+%lu\n", r, last_code,
			       last_addr - (unsigned long)ro);
		}
		sum += (unsigned long)calm(slot, r + 100);
		if (!sigsetjmp(jb, 1)) {
			sum += (unsigned long)traced_null(NULL);
			printf("round %ld: null read did not fault\n", r);
		} else {
			printf("round %ld: null fault code %d at %lu\n", r, last_code, last_addr);
		}
		if (!sigsetjmp(jb, 1)) {
			sum += (unsigned long)nxfn();
			printf("round %ld: no-exec call did not fault\n", r);
		} else {
			printf("round %ld: exec fault code %d at nx+%lu\n", r, last_code,
			       last_addr - (unsigned long)nx);
		}
	}
	printf("faults %d sum %lu slot %ld\n", (int)faults, sum, slot[0]);
	return 0;
}
