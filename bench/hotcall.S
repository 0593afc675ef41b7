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
	.text
	.globl _start
_start:
	mov (%rsp), %rbx          /* argc */
	mov $10000, %r12          /* CALLS */
	mov $2500, %r13           /* INNER */
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
