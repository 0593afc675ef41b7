/* REP string instructions in a function called 20000 times
 * (tests/e2e/test_trap_patch_count.py: counted past the budget by the
 * counting twins, user/jit/twin_rep.c).  traced(i): rep stosb of i & 7
 * bytes (0 included), repe cmpsb over 16 bytes ending at the first
 * difference or not, rep movsb backwards (DF=1) of i & 15 bytes, repne
 * scasb ending on its byte, rep movsq of i & 3 quadwords, rep lodsb of
 * i & 1.  Its buffers carry over from call to call: the counts are those
 * of the fixed sequence 0..19999.  Range: `traced`.  Exit status 0. */
	.text
	.globl _start
_start:
	xor %r12d, %r12d
1:	mov %r12, %rdi
	call traced
	inc %r12
	test $255, %r12d		/* every 256th call: 1 ms asleep (a run of */
	jnz 2f				/* ~0.1 s: gebpf sees its budget full early) */
	mov $35, %eax
	lea nap(%rip), %rdi
	xor %esi, %esi
	syscall
2:	cmp $20000, %r12
	jb 1b
	mov $60, %eax
	xor %edi, %edi
	syscall

	.globl traced
	.type traced, @function
traced:
	cld
	mov %rdi, %rdx
	lea a(%rip), %rdi
	mov %rdx, %rcx
	and $7, %ecx
	mov $0x41, %eax
	rep stosb
	lea a(%rip), %rsi
	lea b(%rip), %rdi
	mov $16, %ecx
	repe cmpsb
	lea a+15(%rip), %rsi
	lea b+15(%rip), %rdi
	mov %rdx, %rcx
	and $15, %ecx
	std
	rep movsb
	cld
	lea b(%rip), %rdi
	mov $32, %ecx
	mov $0x41, %eax
	repne scasb
	lea a(%rip), %rsi
	lea c(%rip), %rdi
	mov %rdx, %rcx
	and $3, %ecx
	rep movsq
	lea a(%rip), %rsi
	mov %rdx, %rcx
	and $1, %ecx
	rep lodsb
	ret
	.size traced, .-traced

	.data
nap:	.quad 0, 1000000
a:	.fill 32, 1, 0
b:	.fill 20, 1, 0
	.byte 0x41
	.fill 11, 1, 0
c:	.fill 32, 1, 0
