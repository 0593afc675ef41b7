/* An indirect call target under another entry's patch that shares its
 * lookup-table slot with a later instruction (tests/e2e/test_trap_patch.py,
 * test_target_under_a_patch): the range is past 64 KiB (6550 10-byte
 * movabs, then nops) but under 8192 instructions, so every instruction is
 * translated up front, in address order; the nop at .Lf + 0x10000 (the
 * same low 16 bits) came later and evicted .Lf from the table (the later
 * wins), the lookup of `call *%rax` missed, ran .Lf natively, i.e. the
 * tail of the return site's jump, and the program died of SIGSEGV.  The
 * instructions under patches are put in the table last.  One call of 7
 * instructions; exit 0.  Range: `traced`. */
	.text
	.globl _start
_start:
	call traced
	mov %eax, %edi
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
	.rept 6550
	movabsq $0x1122334455667788, %r11
	.endr
	.fill .Lf + 0x10004 - ., 1, 0x90
	.size traced, .-traced
