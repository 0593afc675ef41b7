/* A hot loop for budgets, determinism and benchmarks: `hot` sums an array
 * 4000 times over (28k instructions: 1 load + 1 store per
 * iteration).  Traced range: `hot`.  Exit status 0. */
	.text
	.globl _start
_start:
	call hot
	mov %eax, %edi
	and $0, %edi
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
	inc %ecx
	cmp $4000, %ecx
	jne 1b
	ret
	.size hot, .-hot

	.data
	.align 64
arr:	.rept 64
	.long 3
	.endr
sum:	.long 0
