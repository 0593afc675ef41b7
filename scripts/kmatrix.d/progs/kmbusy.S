/* kmatrix smoke program for `sample`: spins in the range [spin, spin_end)
 * for about 1.5 s of its CPU time (checked with clock_gettime of
 * CLOCK_PROCESS_CPUTIME_ID outside the range: a guest starved beside the
 * host's tests gives it as many samples as an idle one), then exits 0.
 * Samples must land inside the range. */
	.text
	.globl	_start
_start:
	mov	$228, %eax		/* clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0) */
	mov	$2, %edi
	lea	t0(%rip), %rsi
	syscall
2:	call	spin
	mov	$228, %eax		/* clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1) */
	mov	$2, %edi
	lea	t1(%rip), %rsi
	syscall
	mov	t1(%rip), %rax		/* elapsed ns = (t1 - t0) * 1e9 + ... */
	sub	t0(%rip), %rax
	imul	$1000000000, %rax, %rax
	add	t1+8(%rip), %rax
	sub	t0+8(%rip), %rax
	cmp	$1500000000, %rax
	jl	2b
	mov	$60, %eax		/* exit(0) */
	xor	%edi, %edi
	syscall

	/* spin over 256 bytes from the entry point: a launch under the patch
	 * trap removes the uprobe that mapped the kernel's uprobe page once the
	 * program ran past it (trace/xol.h; trace_direct's -v says so) */
	.skip	512, 0xcc
	.globl	spin
	.type	spin, @function
spin:
	mov	$200000, %ecx
1:	dec	%ecx
	jnz	1b
	ret
	.globl	spin_end
spin_end:
	.size	spin, spin_end - spin

	.bss
	.balign	16
t0:	.skip	16
t1:	.skip	16
	.section .note.GNU-stack,"",@progbits
