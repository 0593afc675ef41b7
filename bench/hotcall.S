/* Benchmark tracee for the page trap: a long CPU-bound loop that calls a
 * small function, `hot`, once every INNER iterations.
 *
 *     hotcall [CALLS [INNER]]      (decimal; defaults 10000 and 2500)
 *
 * The loop runs CALLS times: INNER iterations of a 4-instruction body
 * (4*INNER instructions), then `call hot`.  `hot` is 7 instructions (1 read,
 * 1 write) and runs exactly CALLS times, so a trace of `--range hot` has
 * 7*CALLS exec lines and CALLS entries.  `cold` is never called: a trace of
 * `--range cold` never enters its range.  Each function sits alone on its own
 * page, so the page trap's pages hold nothing else (code that shares a
 * trapped page with the range is single-stepped too).  Built -static
 * -nostdlib (bench/*.S rule of the Makefile).  Exit status 0. */
#include "tracee.inc"

	.text
	.globl _start
_start:
	ARGS2 10000, 2500
	xor %eax, %eax
	xor %ebx, %ebx
	test %r12, %r12
	jz 8f
	test %r13, %r13
	jz 8f
1:	mov %r13, %rcx
2:	add %rcx, %rax            /* the native work: 4 instructions */
	xor %rax, %rbx
	dec %rcx
	jnz 2b
	call hot
	dec %r12
	jnz 1b
8:	EXIT0_ATOU

	HOT

	.balign 4096
	.globl cold
	.type cold, @function
cold:
	lea arr(%rip), %rsi
	incl (%rsi)
	ret
	.size cold, .-cold
	.balign 4096

	.data
	.align 64
arr:	.fill 64, 4, 0
