/* An in-range target the patch trap's up-front translation does not reach
 * (tests/e2e/test_trap_patch.py, test_in_range_miss): `traced` jumps
 * through a register to .Lfar, past 9000 unreachable nops (more than the
 * 8192 instructions under which every instruction is translated).  The
 * first call misses there (runs natively to its ret), then the program
 * sleeps 300 ms (gebpf translates the missed target meanwhile), then calls
 * `traced` 5 more times, each traced whole.  5 instructions a call; exit 0.
 * Range: `traced`. */
	.text
	.globl _start
_start:
	call traced
	lea ts(%rip), %rdi
	xor %esi, %esi
	mov $35, %eax           /* nanosleep */
	syscall
	mov $5, %r12d
1:	call traced
	dec %r12d
	jnz 1b
	mov $60, %eax
	xor %edi, %edi
	syscall

	.globl traced
	.type traced, @function
traced:
	lea traced(%rip), %rax
	add $(.Lfar - traced), %rax
	jmp *%rax
	.rept 9000
	nop
	.endr
.Lfar:
	mov $42, %eax
	ret
	.size traced, .-traced

	.data
ts:	.quad 0, 300000000
