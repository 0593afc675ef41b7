/* Loads and stores of every size: 1, 2, 4, 8, 16 (SSE), 32 (AVX) and 10 (x87).
 * Traced range: the function `traced`.  Exit status 0. */
#include "start_traced.inc"

	.globl traced
	.type traced, @function
traced:
	lea buf(%rip), %rsi
	lea out(%rip), %rdi
	movb (%rsi), %al		/* 1 */
	movb %al, (%rdi)
	movw 2(%rsi), %ax		/* 2 */
	movw %ax, 2(%rdi)
	movl 4(%rsi), %eax		/* 4 */
	movl %eax, 4(%rdi)
	movq 8(%rsi), %rax		/* 8 */
	movq %rax, 8(%rdi)
	movzbl 17(%rsi), %ecx		/* 1, zero-extended */
	movswq 18(%rsi), %rcx		/* 2, sign-extended */
	addl 20(%rsi), %ecx		/* 4, ALU with memory source */
	addq %rcx, 24(%rdi)		/* 8, read-modify-write */
	incb 30(%rdi)			/* 1, read-modify-write */
	movdqu 32(%rsi), %xmm0		/* 16 */
	movdqu %xmm0, 32(%rdi)
	movaps 48(%rsi), %xmm1		/* 16, aligned */
	movaps %xmm1, 48(%rdi)
	movq 64(%rsi), %xmm2		/* 8 into xmm */
	movd %xmm2, 68(%rdi)		/* 4 from xmm */
	vmovdqu 64(%rsi), %ymm3		/* 32 */
	vmovdqu %ymm3, 64(%rdi)
	vmovdqa 96(%rsi), %ymm4		/* 32, aligned */
	vmovdqa %ymm4, 96(%rdi)
	vzeroupper
	fldt x87val(%rip)		/* 10 */
	fstpt 128(%rdi)			/* 10 */
	fldl 8(%rsi)			/* 8 */
	fstps 140(%rdi)			/* 4 */
	filds 2(%rsi)			/* 2 */
	fistpl 144(%rdi)		/* 4 */
	ret
	.size traced, .-traced

	.data
	.align 64
buf:	.byte 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16
	.fill 112,1,0x5a
x87val:	.quad 0xc90fdaa22168c235
	.word 0x4000
	.align 64
out:	.fill 160,1,0
