/* Accesses that straddle a page boundary (sizes 2..32), reported once at
 * their full size, plus a push whose slot straddles nothing but whose
 * stack page is fresh.  Traced range: `traced`. */
#include "start_traced.inc"

	.globl traced
	.type traced, @function
traced:
	lea page2(%rip), %rsi
	movw -1(%rsi), %ax
	movw %ax, -1(%rsi)
	movl -3(%rsi), %eax
	movl %eax, -2(%rsi)
	movq -5(%rsi), %rax
	movq %rax, -7(%rsi)
	addq $1, -4(%rsi)
	movdqu -9(%rsi), %xmm0
	movdqu %xmm0, -15(%rsi)
	vmovdqu -17(%rsi), %ymm1
	vmovdqu %ymm1, -31(%rsi)
	vzeroupper
	fldt -6(%rsi)
	fstpt -4(%rsi)
	lock xaddq %rax, -3(%rsi)	/* split lock: slow, but exact */
	lea page3(%rip), %rdi
	lea -8(%rdi), %rsi
	mov $2, %ecx
	rep movsq			/* copies across the boundary */
	ret
	.size traced, .-traced

	.data
	.align 4096
page1:	.fill 4096,1,0x11
page2:	.fill 4096,1,0x22
page3:	.fill 64,1,0x33
