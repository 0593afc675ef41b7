/* REP string instructions with counts 0, 1 and N, both directions (DF=0 and
 * DF=1): movs, stos, lods, scas (repe/repne) and cmps (repe only: lackey
 * cannot decode cmps without REP nor repne cmps).  Valgrind ignores REP on
 * LODS (it runs one LODS and leaves RCX alone), so nothing here depends on
 * RCX or RSI after a LODS.  Traced range: `traced`.  Exit status 0. */
#include "start_traced.inc"

/* set RSI/RDI to the start (DF=0) or near the end (DF=1) of the buffers */
.macro PTRS back
	.if \back
	lea src+56(%rip), %rsi
	lea dst+56(%rip), %rdi
	.else
	lea src(%rip), %rsi
	lea dst(%rip), %rdi
	.endif
.endm

.macro ONE back, count, insn:vararg
	PTRS \back
	mov $\count, %ecx
	mov $0x5a, %eax
	\insn
.endm

.macro ALL back
	.irp n, 0, 1, 5
	ONE \back, \n, rep movsb
	ONE \back, \n, rep movsw
	ONE \back, \n, rep movsl
	ONE \back, \n, rep movsq
	ONE \back, \n, rep stosb
	ONE \back, \n, rep stosq
	ONE \back, \n, rep lodsb
	ONE \back, \n, rep lodsq
	ONE \back, \n, repne scasb	/* 0x5a first appears at dst[3] */
	ONE \back, \n, repe scasb
	ONE \back, \n, repe cmpsb
	ONE \back, \n, repe cmpsq
	.endr
	/* scas/cmps stopping on the condition before RCX reaches 0 */
	ONE \back, 40, repne scasb
	ONE \back, 40, repe cmpsb
.endm

	.globl traced
	.type traced, @function
traced:
	cld
	ALL 0
	std
	ALL 1
	cld
	movsb				/* no REP, count 1 */
	stosq
	lodsl
	scasb
	ret
	.size traced, .-traced

	.data
	.align 64
src:	.byte 0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0
	.byte 0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0
	.fill 32,1,0
dst:	.byte 0,0,0,0x5a,0,0,0,0,0,0,0,0,0,0,0,0
	.fill 48,1,0
