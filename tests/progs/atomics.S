/* Atomics: lock add/sub/or/and/inc/xadd/bts, cmpxchg (succeeding and failing
 * compare, locked and not), cmpxchg8b/16b (both outcomes), xchg with memory
 * (implicitly locked).  Traced range: `traced`.  Exit status 0. */
#include "start_traced.inc"

	.globl traced
	.type traced, @function
traced:
	push %rbx
	lea cell(%rip), %rdi
	lock addq $1, (%rdi)
	lock subl $2, 8(%rdi)
	lock orw $0x100, 12(%rdi)
	lock andb $0x7f, 14(%rdi)
	lock incq 16(%rdi)
	mov $5, %eax
	lock xaddq %rax, (%rdi)
	lock xaddl %eax, 8(%rdi)
	lock btsq $3, 24(%rdi)
	/* cmpxchg: compare succeeds (rax == [rdi]) */
	movq (%rdi), %rax
	mov $77, %ecx
	lock cmpxchgq %rcx, (%rdi)
	/* compare fails: the instruction still writes (the old value) */
	mov $1, %eax
	lock cmpxchgq %rcx, (%rdi)
	movl 8(%rdi), %eax
	cmpxchgl %ecx, 8(%rdi)		/* unlocked, succeeds */
	/* cmpxchg16b: RDX:RAX compared with the 16 bytes at 32(%rdi) */
	movq 32(%rdi), %rax
	movq 40(%rdi), %rdx
	mov $9, %ebx
	mov $10, %ecx
	lock cmpxchg16b 32(%rdi)	/* succeeds */
	xor %eax, %eax
	xor %edx, %edx
	lock cmpxchg16b 32(%rdi)	/* fails */
	movl 48(%rdi), %eax
	movl 52(%rdi), %edx
	lock cmpxchg8b 48(%rdi)		/* succeeds */
	/* xchg with a memory operand */
	mov $3, %eax
	xchgq %rax, 56(%rdi)
	xchgb %al, 60(%rdi)
	xchgl 8(%rdi), %eax
	pop %rbx
	ret
	.size traced, .-traced

	.data
	.align 64
cell:	.quad 10, 0x0000ffff00000020, 7, 0, 0x1111, 0x2222, 0x0000000400000003, 0
