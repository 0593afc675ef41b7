/* kmatrix smoke program for `detach`: 7 sleeps of 300 ms (nanosleep through
 * its own syscall instruction), then exit 0.  Traced with --step-all and
 * detached mid-way, it is blocked in a nanosleep it was single-stepped into:
 * it must not die of a SIGTRAP queued at that syscall's exit. */
	.text
	.globl	_start
_start:
	mov	$7, %ebx
1:	mov	$35, %eax		/* nanosleep(&ts, NULL) */
	lea	ts(%rip), %rdi
	xor	%esi, %esi
	syscall
	dec	%ebx
	jnz	1b
	mov	$60, %eax		/* exit(0) */
	xor	%edi, %edi
	syscall

	.data
	.balign	16
ts:	.quad	0, 300000000
	.section .note.GNU-stack,"",@progbits
