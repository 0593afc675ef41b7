/* The end of an asm `traced` shared by pt_relchurn.c and pt_short.c (each
 * pt_crash's or pt_churn's `traced` written out): with v in rbx, i in r13
 * and &slot[i & 3] in r12 (rbx, r12, r13 pushed in that order), every 16th
 * call (i % 16 == 0) a 20 us nanosleep made inside the range (its result
 * added to v, -EINTR as 0), then slot[i & 3] = v & 0xffffff and v & 0xffff
 * returned.  An asm string: put it in the function's __asm__ after v is
 * complete. */
#ifndef PT_TRACED_TAIL_H
#define PT_TRACED_TAIL_H

#define PT_TRACED_TAIL \
	"	test $15, %r13b\n" \
	"	jnz 3f\n" \
	"	sub $16, %rsp\n" \
	"	movq $0, (%rsp)\n" \
	"	movq $20000, 8(%rsp)\n" \
	"	mov %rsp, %rdi\n" \
	"	xor %esi, %esi\n" \
	"	mov $35, %eax\n"                 /* nanosleep */ \
	"	syscall\n" \
	"	add $16, %rsp\n" \
	"	cmp $-4, %rax\n"                 /* -EINTR: 0 */ \
	"	je 3f\n" \
	"	add %rax, %rbx\n" \
	"3:	mov %rbx, %rax\n" \
	"	and $0xffffff, %rax\n" \
	"	mov %rax, (%r12)\n" \
	"	movzwl %bx, %eax\n" \
	"	pop %r13\n" \
	"	pop %r12\n" \
	"	pop %rbx\n" \
	"	ret\n"

#endif
