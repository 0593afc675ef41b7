/* kmatrix smoke program for `strict`: makes its stdin non-blocking, enters
 * strict seccomp mode (only read, write, exit and rt_sigreturn allowed; the
 * kernel also disables rdtsc), then calls `tick` (the range) between short
 * spins until a read of stdin stops saying EAGAIN (EOF: the smoke suite
 * closes the fifo on its stdin once gebpf is done), then writes "kmstrict ok" and exits 0 through exit
 * (exit_group is not allowed).  gebpf attaches meanwhile (docs/trace.md
 * "Seccomp"): one injected system call would kill it with SIGKILL. */
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
	mov	$157, %eax		/* prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) */
	mov	$22, %edi
	mov	$1, %esi
	xor	%edx, %edx
	syscall
	test	%rax, %rax
	jnz	9f
1:	call	tick
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
	mov	$1, %eax		/* write(1, msg, 12) */
	mov	$1, %edi
	lea	msg(%rip), %rsi
	mov	$12, %edx
	syscall
	mov	$60, %eax		/* exit(0) */
	xor	%edi, %edi
	syscall
9:	mov	$60, %eax		/* exit(2): no non-blocking stdin or no strict mode */
	mov	$2, %edi
	syscall

	.globl	tick
	.type	tick, @function
tick:
	addq	$1, counter(%rip)
	ret
	.globl	tick_end
tick_end:
	.size	tick, tick_end - tick

	.data
msg:	.ascii	"kmstrict ok\n"
	.bss
	.balign	16
buf:	.skip	8
counter: .skip	8
	.section .note.GNU-stack,"",@progbits
