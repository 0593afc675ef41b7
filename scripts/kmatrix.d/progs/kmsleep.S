/* kmatrix smoke program for `detach`: 12 sleeps of 300 ms (nanosleep through
 * its own syscall instruction: 3.6 s, so a slow guest's gebpf finds it
 * alive), then exit 0.  Traced with --step-all and
 * detached mid-way, it is blocked in a nanosleep it was single-stepped into:
 * it must not die of a SIGTRAP queued at that syscall's exit.  For
 * `stopped`: SIGSTOPped in its first sleep, then traced from its SIGCONT on
 * (the range `loop`..`loop_end`: the restarted sleep's syscall, then eleven
 * more rounds). */
	.text
	.globl	_start, loop, loop_end
_start:
	mov	$12, %ebx
loop:	mov	$35, %eax		/* nanosleep(&ts, NULL) */
	lea	ts(%rip), %rdi
	xor	%esi, %esi
	syscall
	dec	%ebx
	jnz	loop
loop_end:
	mov	$60, %eax		/* exit(0) */
	xor	%edi, %edi
	syscall

	.data
	.balign	16
ts:	.quad	0, 300000000
	.section .note.GNU-stack,"",@progbits
