/* kmatrix smoke program for the trace check's sighere runs (issue 35): a
 * SIGILL handler inside the range (`work`, up to `work_end`: a loop and the
 * handler) steps over a ud2 (the ucontext's rip += 2) and returns through
 * its restorer, outside the range, into the range's middle: 20 rounds, a
 * ud2 in every 4th.  Writes "kmsighere ok", exit 0.  Traced under the probe
 * trap and under --trap none: the same bytes (the trace goes on where the
 * frame's rt_sigreturn lands: docs/trace.md "Signals"). */
	.text
	.globl	_start
_start:
	mov	$13, %eax		/* rt_sigaction(SIGILL, &sa, NULL, 8) */
	mov	$4, %edi
	lea	sa(%rip), %rsi
	xor	%edx, %edx
	mov	$8, %r10d
	syscall
	test	%rax, %rax
	jnz	9f
	call	work
	cmpq	$5, ills(%rip)		/* 20 rounds, a ud2 in rounds 20, 16, ..., 4 */
	jne	9f
	mov	$1, %eax		/* write(1, msg, 13) */
	mov	$1, %edi
	lea	msg(%rip), %rsi
	mov	$13, %edx
	syscall
	mov	$60, %eax		/* exit(0) */
	xor	%edi, %edi
	syscall
9:	mov	$60, %eax		/* exit(2) */
	mov	$2, %edi
	syscall

	.globl	work
	.type	work, @function
work:
	mov	$20, %ecx
1:	addq	%rcx, counter(%rip)
	test	$3, %ecx
	jnz	2f
	ud2
2:	dec	%ecx
	jnz	1b
	ret
	.type	on_ill, @function	/* (a function symbol: an entry of every trap) */
on_ill:					/* (rdx: the ucontext; its rip at +168) */
	addq	$2, 168(%rdx)
	addq	$1, ills(%rip)
	ret
	.globl	work_end
work_end:
	.size	work, work_end - work

restore:
	mov	$15, %eax		/* rt_sigreturn */
	syscall

	.data
	.balign	8
sa:	.quad	on_ill, 0x04000004, restore, 0	/* SA_RESTORER | SA_SIGINFO */
counter: .quad	0
ills:	.quad	0
msg:	.ascii	"kmsighere ok\n"
