/* SIMD memory operands: SSE (movups/movaps/movdqa/movsd/movss/paddd with a
 * memory source), AVX (vmovups xmm/ymm, vbroadcastss, vinsertf128, vmovq),
 * AVX2 (vpbroadcastq, vpaddd ymm with a memory source) and AVX2 gathers
 * with partial masks (masked-off lanes do not access memory on hardware;
 * lackey reads 4 bytes at RSP for each of them).  Traced range: `traced`. */
#include "start_traced.inc"

	.globl traced
	.type traced, @function
traced:
	push %rbp
	mov %rsp, %rbp
	lea vec(%rip), %rsi
	lea out(%rip), %rdi
	movups 4(%rsi), %xmm0		/* SSE */
	movaps %xmm0, (%rdi)
	movdqa 16(%rsi), %xmm1
	paddd 32(%rsi), %xmm1
	movdqa %xmm1, 16(%rdi)
	movsd 40(%rsi), %xmm2
	movss %xmm2, 36(%rdi)
	movhps 48(%rsi), %xmm2
	movlps %xmm2, 40(%rdi)
	vmovups 8(%rsi), %xmm3		/* AVX */
	vmovups %xmm3, 48(%rdi)
	vmovups 12(%rsi), %ymm4
	vmovups %ymm4, 64(%rdi)
	vbroadcastss 60(%rsi), %ymm5
	vinsertf128 $1, 16(%rsi), %ymm5, %ymm5
	vmovups %ymm5, 96(%rdi)
	vmovq 72(%rsi), %xmm6
	vmovq %xmm6, 128(%rdi)
	vpbroadcastq 80(%rsi), %ymm7	/* AVX2 */
	vpaddd 96(%rsi), %ymm7, %ymm7
	vmovdqu %ymm7, 160(%rdi)
	/* gathers: index vector idx, mask lanes alternately on/off */
	vmovdqu idx(%rip), %ymm1
	vmovdqu mask(%rip), %ymm2
	vpxor %ymm0, %ymm0, %ymm0
	vpgatherdd %ymm2, (%rsi,%ymm1,4), %ymm0
	vmovdqu %ymm0, 192(%rdi)
	vmovdqu mask(%rip), %xmm2
	vpxor %xmm0, %xmm0, %xmm0
	vgatherdps %xmm2, 16(%rsi,%xmm1,4), %xmm0
	vmovdqu %xmm0, 224(%rdi)
	vpcmpeqd %ymm2, %ymm2, %ymm2	/* all lanes on */
	vpxor %ymm0, %ymm0, %ymm0
	vpgatherdd %ymm2, (%rsi,%ymm1,4), %ymm0
	vmovdqu %ymm0, 192(%rdi)
	vzeroupper
	leave
	ret
	.size traced, .-traced

	.data
	.align 64
vec:	.long 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
	.long 16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
	.long 32,33,34,35,36,37,38,39
idx:	.long 7,3,0,12,5,9,1,30
mask:	.long -1,0,-1,-1,0,0,-1,0
	.align 64
out:	.fill 256,1,0
