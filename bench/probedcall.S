/* Benchmark tracee for the patch trap's entries that keep a uprobe: `work`
 * called CALLS times.
 *
 *     probedcall [CALLS]           (decimal; default 100000)
 *
 * `work` pushes, calls `leaf` (outside the range) and pops at the return
 * site `work_ret`: with `--range work-work_ret` (its last byte the 1-byte
 * pop) the range ends inside the return site's 5 bytes, so the planner
 * refuses that entry and it keeps a uprobe, entered once a call; the start
 * is patched.  3 in-range instructions (push, call, pop) and 2 entries a
 * call.  Built -static -nostdlib (bench/*.S rule of the Makefile). */
#include "tracee.inc"

	.text
	.globl _start
_start:
	ARGS2 100000, 0
	test %r12, %r12
	jz 8f
1:	call work
	dec %r12
	jnz 1b
8:	EXIT0_ATOU

	.balign 64
	.globl work
	.type work, @function
work:
	push %rax
	call leaf
	.globl work_ret
work_ret:
	pop %rdx                  /* the range's last byte */
	ret
leaf:
	incl counter(%rip)
	ret

	.data
counter:
	.long 0
