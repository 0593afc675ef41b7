/* kmatrix smoke program for `alarm` (issue 23): SIGALRM every millisecond
 * (setitimer ITIMER_REAL) whose handler, outside the range, works for a few
 * hundred instructions; meanwhile `work` (the range, 91 instructions) is
 * called between short spins until a read of stdin stops saying EAGAIN (the
 * smoke suite closes the fifo on its stdin once gebpf is done), then the
 * timer is stopped, "kmalarm ok" written and exit 0.  gebpf attaches meanwhile: the owner's handler must run
 * natively to its rt_sigreturn (docs/trace.md "Signals"), or the stepped
 * handler, slower than the timer, starves the range. */
	.text
	.globl	_start
_start:
	mov	$72, %eax		/* fcntl(0, F_SETFL, O_NONBLOCK) */
	xor	%edi, %edi
	mov	$4, %esi
	mov	$0x800, %edx
	syscall
	test	%rax, %rax
	jnz	9f
	mov	$13, %eax		/* rt_sigaction(SIGALRM, &sa, NULL, 8) */
	mov	$14, %edi
	lea	sa(%rip), %rsi
	xor	%edx, %edx
	mov	$8, %r10d
	syscall
	test	%rax, %rax
	jnz	9f
	mov	$38, %eax		/* setitimer(ITIMER_REAL, &itv, NULL) */
	xor	%edi, %edi
	lea	itv(%rip), %rsi
	xor	%edx, %edx
	syscall
	test	%rax, %rax
	jnz	9f
1:	call	work
	mov	$20000, %ecx
2:	dec	%ecx
	jnz	2b
	xor	%eax, %eax		/* read(0, buf, 1) */
	xor	%edi, %edi
	lea	buf(%rip), %rsi
	mov	$1, %edx
	syscall
	cmp	$-11, %rax		/* -EAGAIN: the writer is still there */
	je	1b
	mov	$38, %eax		/* setitimer(ITIMER_REAL, &off, NULL) */
	xor	%edi, %edi
	lea	off(%rip), %rsi
	xor	%edx, %edx
	syscall
	mov	$1, %eax		/* write(1, msg, 11) */
	mov	$1, %edi
	lea	msg(%rip), %rsi
	mov	$11, %edx
	syscall
	mov	$60, %eax		/* exit(0) */
	xor	%edi, %edi
	syscall
9:	mov	$60, %eax		/* exit(2): could not set up */
	mov	$2, %edi
	syscall

	.globl	work
	.type	work, @function
work:
	mov	$30, %ecx
3:	addq	%rcx, counter(%rip)
	dec	%ecx
	jnz	3b
	ret
	.globl	work_end
work_end:
	.size	work, work_end - work

on_alarm:
	mov	$200, %ecx
4:	addq	%rcx, hwork(%rip)
	dec	%ecx
	jnz	4b
	ret

restore:
	mov	$15, %eax		/* rt_sigreturn */
	syscall

	.data
	.balign	8
sa:	.quad	on_alarm, 0x14000000, restore, 0	/* SA_RESTORER | SA_RESTART */
itv:	.quad	0, 1000, 0, 1000
off:	.quad	0, 0, 0, 0
msg:	.ascii	"kmalarm ok\n"
	.bss
	.balign	16
buf:	.skip	8
counter: .skip	8
hwork:	.skip	8
	.section .note.GNU-stack,"",@progbits
