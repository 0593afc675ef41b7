/* Benchmark tracee for an entry trap's neighbours: `hot` shares its page
 * with `busy`, which runs far more often.
 *
 *     neighbour [CALLS [PER]]      (decimal; defaults 10000 and 100)
 *
 * The loop runs CALLS times: `call hot` once, then `call busy` PER times.
 * `hot` is 7 instructions (1 read, 1 write), as in hotcall; `busy` is 102
 * instructions (a 25-iteration, 4-instruction loop, no memory access) and
 * sits right after `hot` on the same page.  With the defaults: 10,000 calls
 * of `hot`, 1e6 calls of `busy`, ~1.05e8 instructions.  A trace of
 * `--range hot` has 7*CALLS exec lines and CALLS entries; the probe trap runs
 * busy natively, the page trap single-steps all of it (its page is trapped).
 * Built -static -nostdlib (bench/*.S rule of the Makefile).  Exit status 0. */
#include "tracee.inc"

	.text
	.globl _start
_start:
	ARGS2 10000, 100
	xor %eax, %eax
	xor %ebx, %ebx
	test %r12, %r12
	jz 8f
1:	call hot
	mov %r13, %r14
	test %r14, %r14
	jz 3f
2:	call busy
	dec %r14
	jnz 2b
3:	dec %r12
	jnz 1b
8:	EXIT0_ATOU

	HOT

	.globl busy
	.type busy, @function
busy:
	mov $25, %ecx
1:	add %rcx, %rax
	xor %rax, %rbx
	dec %ecx
	jnz 1b
	ret
	.size busy, .-busy
	.balign 4096

	.data
	.align 64
arr:	.fill 64, 4, 0
