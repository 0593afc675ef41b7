/* An internal loop target inside an entry's 5 bytes (tests/e2e/
 * test_trap_patch.py, test_internal_target_under_an_entry): `traced` calls
 * `helper`, out of the range, and the call's return site .Lret (an entry)
 * is a 1-byte nop followed by .Lloop, the head of a loop reached only by
 * the `jnz` inside the range.  A jmp rel32 written at .Lret would cover
 * .Lloop: code running natively from the original bytes (an in-range
 * miss, a thread not its area's owner) would branch into the jump's
 * middle, so the planner keeps a uprobe there.  3 calls of 12
 * instructions (push, mov, call, nop, 3 x (dec, jnz), pop, ret; helper's
 * 2 are out of the range); exit 0.  Range: `traced`. */
	.text
	.globl _start
_start:
	mov $3, %r12d
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
	push %rbx
	mov $3, %ebx
	call helper
.Lret:	nop
.Lloop:	dec %ebx
	jnz .Lloop
	pop %rbx
	ret
	.size traced, .-traced

helper:
	xor %eax, %eax
	ret
