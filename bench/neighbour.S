/* Benchmark tracee for an entry trap's neighbours: `hot` shares its page
 * with `busy`, which runs far more often.
 *
 *     neighbour [CALLS [PER]]      (decimal; defaults 10000 and 100)
 *
 * The loop runs CALLS times: `call hot` once, then `call busy` PER times.
 * `hot` is 7 instructions (1 read, 1 write), as in hotcall; `busy` is 102
 * instructions (a 25-iteration, 4-instruction loop, no memory access) and
 * sits right after `hot` on the same page.  With the defaults: 10,000 calls
 * of `hot`, 1e6 calls of `busy`, ~1.03e8 instructions.  A trace of
 * `--range hot` has 7*CALLS exec lines and CALLS entries; the probe trap runs
 * busy natively, the page trap single-steps all of it (its page is trapped).
 * Built -static -nostdlib (bench/*.S rule of the Makefile).  Exit status 0. */
	.text
	.globl _start
_start:
	mov (%rsp), %rbx          /* argc */
	mov $10000, %r12          /* CALLS */
	mov $100, %r13            /* PER */
	cmp $2, %rbx
	jl 9f
	mov 16(%rsp), %rsi        /* argv[1] */
	call atou
	mov %rax, %r12
	cmp $3, %rbx
	jl 9f
	mov 24(%rsp), %rsi        /* argv[2] */
	call atou
	mov %rax, %r13
9:	xor %eax, %eax
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
8:	xor %edi, %edi
	mov $60, %eax
	syscall

/* Decimal string at %rsi -> %rax. */
atou:
	xor %eax, %eax
1:	movzbl (%rsi), %edx
	sub $'0', %edx
	cmp $9, %edx
	ja 2f
	imul $10, %rax, %rax
	add %rdx, %rax
	inc %rsi
	jmp 1b
2:	ret

	.section .text.trapped, "ax", @progbits
	.balign 4096
	.globl hot
	.type hot, @function
hot:
	lea arr(%rip), %rsi
	mov %r12d, %edx
	and $63, %edx
	mov (%rsi,%rdx,4), %r8d
	add $1, %r8d
	mov %r8d, (%rsi,%rdx,4)
	ret
	.size hot, .-hot

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
