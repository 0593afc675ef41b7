/* kmatrix smoke program for an exec made by a thread other than the main
 * one: kmexecthr PROG.  A second thread (raw clone, CLONE_VM|FS|FILES|
 * SIGHAND|THREAD|SYSVSEM) execs PROG (argv {PROG, NULL}, no environment)
 * while the main thread waits in nanosleep; the kernel kills the main thread
 * and the exec'ing thread takes over its pid.  A tracer whose uprobes were
 * attached for the old main thread sees nothing of PROG unless it attaches
 * them again (docs/trace.md "Probe trap").  Exit: PROG's (1 when the exec
 * fails or PROG is missing). */
	.text
	.globl	_start
_start:
	cmpq	$2, (%rsp)
	jb	fail
	mov	16(%rsp), %rax		/* argv[1] */
	mov	%rax, path(%rip)
	mov	%rax, argv(%rip)
	mov	$56, %eax		/* clone */
	mov	$0x50f00, %edi
	lea	stack_top(%rip), %rsi
	xor	%edx, %edx
	xor	%r10d, %r10d
	xor	%r8d, %r8d
	syscall
	test	%eax, %eax
	jz	child
	js	fail
1:	mov	$35, %eax		/* nanosleep(&ts, NULL) until the exec kills it */
	lea	ts(%rip), %rdi
	xor	%esi, %esi
	syscall
	jmp	1b
child:
	mov	$59, %eax		/* execve(path, argv, NULL) */
	mov	path(%rip), %rdi
	lea	argv(%rip), %rsi
	xor	%edx, %edx
	syscall
fail:
	mov	$231, %eax		/* exit_group(1) */
	mov	$1, %edi
	syscall

	.data
	.balign	16
ts:	.quad	1, 0
path:	.quad	0
argv:	.quad	0, 0
	.bss
	.balign	16
	.skip	8192
stack_top:
	.section .note.GNU-stack,"",@progbits
