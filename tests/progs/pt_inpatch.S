/* An indirect call target under another entry's patch (tests/e2e/
 * test_trap_patch.py, test_target_under_a_patch; found by the random corpus,
 * tests/corpus): `traced` calls .Lf through a register, and .Lf starts 2
 * bytes after the call's return site, an entry whose 5-byte jump covers
 * .Lf's first 3 bytes.  Past 8200 unreachable nops (more than the 8192
 * instructions under which every instruction is translated) only the
 * instructions under a patch are translated up front besides the entries'
 * closure: without that, the lookup missed .Lf, ran it natively, i.e. the
 * jump's tail, and the program died of SIGSEGV.  5 calls of 7 instructions;
 * exit 0 (each call returns 0).  Range: `traced`. */
	.text
	.globl _start
_start:
	mov $5, %r12d
1:	call traced
	or %eax, %r13d
	dec %r12d
	jnz 1b
	mov %r13d, %edi
	mov $60, %eax
	syscall

	.globl traced
	.type traced, @function
traced:
	lea .Lf(%rip), %rax
	call *%rax
	jmp 2f
.Lf:	mov $7, %eax
	ret
2:	sub $7, %eax
	ret
	.rept 8200
	nop
	.endr
	.size traced, .-traced
