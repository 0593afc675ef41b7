/* The target exits inside the range: `traced` stores a value and calls
 * exit_group(3) itself, so the trace ends mid-function.  Exit status 3. */
	.text
	.globl _start
_start:
	call traced
	ud2				/* never reached */

	.globl traced
	.type traced, @function
traced:
	push %rbp
	mov %rsp, %rbp
	movq $42, val(%rip)
	mov $231, %eax			/* exit_group */
	mov $3, %edi
	syscall
	ud2
	.size traced, .-traced

	.data
	.align 8
val:	.quad 0
