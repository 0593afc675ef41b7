/* kmatrix smoke program: a tiny range [work, work_end) with reads, writes,
 * a read-modify-write loop, 16-byte SSE accesses, push/pop and call/ret on a
 * private stack in .bss (so every address in the trace is fixed by km.ld and
 * the expectation needs no normalising).  The range's stores are the first
 * touches of two .bss pages (page1, page2): with --faults each gives a
 * user write fault inside the range.  after_work is where `snap --at` stops:
 * page2 then holds the 16 bytes of `pattern`. */
	.text
	.globl	_start
_start:
	lea	stack_top(%rip), %rsp	/* fixed stack: no env/auxv dependence */
	call	work
	.globl	after_work
after_work:
	nop
	mov	$60, %eax		/* exit(0) */
	xor	%edi, %edi
	syscall

	.globl	work
	.type	work, @function
work:
	mov	pattern(%rip), %rax	/* read 8 */
	mov	%rax, page1(%rip)	/* write 8: first touch of page1 */
	mov	$3, %ecx
1:	add	%rcx, page1+8(%rip)	/* read 8 + write 8 */
	dec	%ecx
	jnz	1b
	push	%rax			/* write 8 on the private stack */
	call	leaf			/* write 8 (return address) */
	.globl	work_ret
work_ret:				/* (an entry: the return site) */
	pop	%rdx			/* read 8 */
	movdqu	pattern(%rip), %xmm0	/* read 16 */
	movdqu	%xmm0, page2(%rip)	/* write 16: first touch of page2 */
	ret				/* read 8 */
leaf:
	incl	counter(%rip)		/* read 4 + write 4 */
	ret				/* read 8 */
	.globl	work_end
work_end:
	.size	work, work_end - work

	.data
	.balign	16
	.globl	pattern
pattern:
	.ascii	"gebpf-kmatrix-ok"
counter:
	.long	41

	.bss
	.balign	4096
stack:
	.skip	4096
	.globl	stack_top
stack_top:
	.globl	page1
page1:
	.skip	4096
	.globl	page2
page2:
	.skip	4096
	.section .note.GNU-stack,"",@progbits
