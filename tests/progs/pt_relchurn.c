/* pt_churn (tests/progs/pt_churn.c: its threads, arguments and output)
 * with a `traced` whose patched entries begin with a call and with jccs, so
 * that the patch trap's owner check sends a thread that is not its area's
 * owner through relocated branches (user/jit/reloc.c): its start is a
 * `call pre` (out of the range: a call rel32 in the entry's 5 bytes), the
 * return site after it a `test; jz rel8; add`, the one after `helper` a
 * `cmp; jb rel8`, both taken about half the time (test_trap_crash.py).
 *
 * Usage: pt_relchurn THREADS TOTAL CALLS.  Prints "TOTAL SUM".  Range:
 * `traced`. */
#define PT_CHURN_TRACED
long traced(long *slot, long i);
long pre(long *slot, long i);

/* traced(slot, i): v = slot[i & 3] * 31 + i + pre(i), odd pre + 7;
 * v += helper(v & 0xff), less 50 when it is 100 or more; every 16th call a
 * 20 us nanosleep in the range; slot[i & 3] = v & 0xffffff; v & 0xffff. */
#include "pt_traced_tail.h"

__asm__(
	".text\n"
	".globl traced, pre\n"
	".type traced, @function\n"
	"traced:\n"
	"	call pre\n"                      /* entry: a call rel32 */
	"	test $1, %al\n"                  /* return site: test; jz rel8; add */
	"	jz 1f\n"
	"	add $7, %rax\n"
	"1:	push %rbx\n"
	"	push %r12\n"
	"	push %r13\n"
	"	mov %rsi, %r13\n"
	"	mov %esi, %ecx\n"
	"	and $3, %ecx\n"
	"	lea (%rdi,%rcx,8), %r12\n"
	"	imul $31, (%r12), %rbx\n"
	"	add %r13, %rbx\n"
	"	add %rax, %rbx\n"
	"	movzbl %bl, %edi\n"
	"	call helper\n"
	"	cmp $100, %rax\n"                /* return site: cmp; jb rel8 */
	"	jb 2f\n"
	"	sub $50, %rax\n"
	"2:	add %rax, %rbx\n"
	PT_TRACED_TAIL
	".size traced, . - traced\n"
	".type pre, @function\n"
	"pre:\n"
	"	lea 5(%rsi,%rsi,2), %rax\n"
	"	ret\n"
	".size pre, . - pre\n");

#include "pt_churn.c"
