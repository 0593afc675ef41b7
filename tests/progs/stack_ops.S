/* Stack operations: push/pop (register, memory, immediate), call/ret,
 * ret imm, enter/leave (nesting level 0), pushf/popf.
 * Traced range: `traced` (helpers it calls lie inside it).  Exit status 0. */
#include "start_traced.inc"

	.globl traced
	.type traced, @function
traced:
	push %rbp
	mov %rsp, %rbp
	push %rbx
	pushq $0x1234			/* push imm */
	pushq val(%rip)			/* push from memory: read, then write */
	popq slot(%rip)			/* pop to memory: read, then write */
	pop %rax
	pushw $7			/* 2-byte push */
	popw %cx			/* 2-byte pop */
	pushf
	orq $1, (%rsp)			/* touch the pushed flags */
	popf
	clc
	mov $3, %edi
	call .Lleaf
	pushq $5
	call .Lretimm			/* ret $8 pops the argument */
	lea -64(%rsp), %rsp
	call .Lframe
	lea 64(%rsp), %rsp
	pop %rbx
	leave
	ret
.Lleaf:
	lea (%rdi,%rdi,2), %eax
	ret
.Lretimm:
	mov 8(%rsp), %rax
	ret $8
.Lframe:
	enter $32, $0
	movq %rdi, -8(%rbp)
	movq -8(%rbp), %rdx
	movq %rdx, -32(%rbp)
	leave
	ret
	.size traced, .-traced

	.data
	.align 8
val:	.quad 0x1122334455667788
slot:	.quad 0
