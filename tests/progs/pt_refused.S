/* A range the patch trap does not take: `traced` holds instructions its
 * stop-free mode refuses (`loop`, `xlat`: docs/trace.md "A trap without
 * stops"), which the probe trap traces; test_trap_patch_exec.py execs it
 * so that a new image falls back to the probe trap.  Traced range:
 * `traced`.  Exit status 0. */
#include "start_traced.inc"

	.globl traced
	.type traced, @function
traced:
	lea table(%rip), %rbx
	mov $4, %ecx
	xor %eax, %eax
1:	mov %cl, %al
	xlatb
	add %al, sum(%rip)
	loop 1b
	ret
	.size traced, .-traced

	.data
table:	.byte 10, 11, 12, 13, 14, 15, 16, 17
sum:	.byte 0
