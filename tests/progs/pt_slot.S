/* An indirect call target under another entry's patch that shares its
 * lookup-table slot with a later instruction (tests/e2e/test_trap_patch.py,
 * test_target_under_a_patch): the range is past 64 KiB (4360 15-byte
 * nops, then 1-byte ones) but under 8192 instructions, so every instruction is
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
	.rept 4360	/* nopw %cs:0(%rax,%rax,1) with five more 0x66: 15 bytes, the
			 * longest instruction (6550 10-byte movabs filled the code
			 * cache's 8 MiB once its blocks grew: a block from each) */
	.byte 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0
	.endr
	.fill .Lf + 0x10004 - ., 1, 0x90
	.size traced, .-traced
