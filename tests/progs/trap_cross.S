/* An instruction that starts on one page and ends on the next, where the
 * range `traced` begins: under the page trap its fetch faults with si_addr =
 * the second page's first byte, not rip (the instruction starts on the page
 * the trap left alone).  Reached twice by falling through from the page
 * before, and twice by a jump straight to it; `traced` also gets one direct
 * call.  Exit status 0 when every result is right (2 = wrong result).
 * Range: `traced`. */
	.text
	.globl _start
_start:
	xor %r12d, %r12d		/* sum of the results */
	mov $2, %r13d
1:	call fall			/* falls through into the crossing insn */
	add %rax, %r12
	call jump			/* jumps to it */
	add %rax, %r12
	dec %r13d
	jnz 1b
	call traced			/* a plain entry, eax = whatever it holds */
	mov $60, %eax
	/* 4 * (0x1234567 + 3) expected */
	mov $0x1234567, %rcx
	add $3, %rcx
	shl $2, %rcx
	xor %edi, %edi
	cmp %rcx, %r12
	je 2f
	mov $2, %edi
2:	syscall

jump:
	nop
	jmp cross

	.balign 4096
	.skip 4096 - 6
fall:					/* 3 nops, then the 5-byte mov... */
	nop
	nop
	nop
cross:					/* ...starting 3 bytes before the boundary */
	movl $0x1234567, %eax		/* b8 imm32: 5 bytes, crosses the boundary */
	.globl traced
	.type traced, @function
traced:					/* 2 bytes into the range's page */
	add $1, %eax
	add $2, %eax
	ret
	.size traced, .-traced
