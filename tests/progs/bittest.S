/* Bit tests on memory: bt/bts/btr/btc with an immediate offset and with a
 * register offset (positive, beyond the operand, negative), 16/32/64-bit
 * operands.  A register offset addresses the operand-sized unit holding the
 * bit (hardware) - lackey reports the byte holding it.  Every memory base
 * here is aligned to its operand size.  Traced range: `traced`. */
#include "start_traced.inc"

	.globl traced
	.type traced, @function
traced:
	lea bits+64(%rip), %rsi
	btl $13, (%rsi)			/* immediate offsets */
	btq $70, (%rsi)
	btsw $5, 2(%rsi)
	btrl $31, 4(%rsi)
	btcq $1, 8(%rsi)
	mov $7, %eax			/* register offsets */
	bt %rax, (%rsi)
	bt %eax, 4(%rsi)
	bt %ax, 2(%rsi)
	mov $77, %ecx
	bts %rcx, (%rsi)		/* bit 77: unit at +8 */
	btr %ecx, (%rsi)		/* bit 77: unit at +8 (32-bit: +8) */
	btc %cx, 16(%rsi)		/* bit 77: unit at +8 (16-bit: +8) */
	mov $-9, %rdx
	bt %rdx, 16(%rsi)		/* bit -9: unit at -8 */
	bts %edx, 16(%rsi)		/* 32-bit: unit at -4 */
	mov $200, %edx
	btc %rdx, bits(%rip)		/* rip-relative base, unit at +24 */
	ret
	.size traced, .-traced

	.data
	.align 64
bits:	.fill 160,1,0xa5
