/* Benchmark tracee: `hot` runs a load/add/store loop ITER times (7
 * instructions, 1 read + 1 write per iteration); the process does nothing
 * else, so a whole-process step count is ~7*ITER.  ITER comes from argv[1]
 * (decimal) or defaults to 100000.  Built -static -nostdlib. */
	.text
	.globl _start
_start:
	mov $100000, %r12
	mov (%rsp), %rax          /* argc */
	cmp $2, %rax
	jl 2f
	mov 16(%rsp), %rsi        /* argv[1] */
	xor %r12, %r12
3:	movzbl (%rsi), %eax
	test %al, %al
	jz 2f
	sub $'0', %eax
	imul $10, %r12, %r12
	add %rax, %r12
	inc %rsi
	jmp 3b
2:	mov %r12, %rdi
	call hot
	xor %edi, %edi
	mov $60, %eax
	syscall

	.globl hot
	.type hot, @function
hot:
	lea arr(%rip), %rsi
	xor %eax, %eax
	xor %ecx, %ecx
1:	mov %ecx, %edx
	and $63, %edx
	add (%rsi,%rdx,4), %eax
	mov %eax, sum(%rip)
	inc %rcx
	cmp %rdi, %rcx
	jne 1b
	ret
	.size hot, .-hot

	.data
	.align 64
arr:	.fill 64, 4, 3
sum:	.long 0
