/* kmatrix smoke program for the multi-threaded resume: a second thread made
 * with a raw clone(CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|PARENT_SETTID|
 * CHILD_CLEARTID) sleeps 20 x 300 ms (nanosleep: 6 s, so a
 * slow guest's snapshot finds it alive) and exits; the first waits
 * in FUTEX_WAIT on the clear_child_tid word until the kernel clears it (as
 * glibc's pthread_join does), writes "kmthreads ok\n" and exits 0.  A resume
 * that lost the second thread or its clear_child_tid waits forever. */
	.text
	.globl	_start
_start:
	mov	$56, %eax		/* clone */
	mov	$0x350f00, %edi
	lea	stack_top(%rip), %rsi
	lea	ctid(%rip), %rdx	/* parent_tid: the tid is there before either runs */
	lea	ctid(%rip), %r10	/* child_tid: cleared and woken at its exit */
	xor	%r8d, %r8d
	syscall
	test	%eax, %eax
	jz	child
1:	mov	ctid(%rip), %edx	/* while (ctid) futex(&ctid, FUTEX_WAIT, ctid, NULL) */
	test	%edx, %edx
	jz	2f
	mov	$202, %eax
	lea	ctid(%rip), %rdi
	xor	%esi, %esi
	xor	%r10d, %r10d
	syscall
	jmp	1b
2:	mov	$1, %eax		/* write(1, msg, 13) */
	mov	$1, %edi
	lea	msg(%rip), %rsi
	mov	$13, %edx
	syscall
	mov	$231, %eax		/* exit_group(0) */
	xor	%edi, %edi
	syscall
child:
	mov	$20, %ebx
3:	mov	$35, %eax		/* nanosleep(&ts, NULL) */
	lea	ts(%rip), %rdi
	xor	%esi, %esi
	syscall
	dec	%ebx
	jnz	3b
	mov	$60, %eax		/* exit(0): this thread only */
	xor	%edi, %edi
	syscall

	.data
	.balign	16
ts:	.quad	0, 300000000
ctid:	.long	0
msg:	.ascii	"kmthreads ok\n"
	.bss
	.balign	16
	.skip	8192
stack_top:
	.section .note.GNU-stack,"",@progbits
