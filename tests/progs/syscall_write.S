/* A system call inside the range: write(1, msg, 6) and getpid().  The
 * kernel's read of msg is not an instruction access.  Traced: `traced`. */
#include "start_traced.inc"

	.globl traced
	.type traced, @function
traced:
	push %rbx
	mov $1, %eax			/* write */
	mov $1, %edi
	lea msg(%rip), %rsi
	mov $6, %edx
	syscall
	mov %rax, result(%rip)
	mov $39, %eax			/* getpid */
	syscall
	movq result(%rip), %rbx
	pop %rbx
	ret
	.size traced, .-traced

	.data
msg:	.ascii "hello\n"
	.align 8
result:	.quad 0
