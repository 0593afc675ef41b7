/* pt_crash (tests/progs/pt_crash.c: its threads, arguments and output) with
 * a `traced` of the shape of glibc's memmove, whose start takes the patch
 * trap's 2-byte jump to a trampoline (jit/patch.h): its first instruction
 * is 3 bytes long and the next is an entry of its own, `traced_in`, where
 * `traced_alt` (out of the range) jumps in, as mempcpy into memmove's
 * tail; before it, gas's nops, into which `traced_chk` falls through, as
 * __memmove_chk into memmove.  Each thread's call i goes in the three
 * ways in turn (traced, traced_chk, traced_alt), each computing what
 * pt_crash's `traced` computes: the output is pt_crash's for the same
 * counts.  `traced_pad` (an object symbol) names the nops, so that a test
 * compares them with the file too.
 *
 * Usage: pt_short THREADS FILL[p] [N0 N1 ...] (pt_crash's).  Range:
 * `traced`. */
#define PT_CRASH_TRACED
long traced(long *slot, long i), traced_chk(long *slot, long i), traced_alt(long *slot, long i);
#define CALL_TRACED(slot, i)                                              \
	((i) % 3 == 0 ? traced(slot, i) : (i) % 3 == 1 ? traced_chk(slot, i) \
						     : traced_alt(slot, i))

/* v = slot[i & 3] * 31 + i; v += helper(v & 0xff); every 16th call a 20 us
 * nanosleep in the range (its result added, -EINTR as 0); slot[i & 3] =
 * v & 0xffffff; v & 0xffff. */
#include "pt_traced_tail.h"

__asm__(
	".text\n"
	".globl traced_chk, traced_pad, traced, traced_in, traced_alt\n"
	".p2align 5\n"
	".type traced_chk, @function\n"
	"traced_chk:\n"
	"	test %rsi, %rsi\n"
	"	js traced_neg\n"                 /* (never taken: i >= 0) */
	".size traced_chk, . - traced_chk\n"
	".type traced_pad, @object\n"
	"traced_pad:\n"
	".p2align 5\n"                           /* gas's nops, falling into traced */
	".size traced_pad, . - traced_pad\n"
	".type traced, @function\n"
	"traced:\n"
	"	mov %rsi, %rax\n"                /* 3 bytes: traced_in at +3 */
	"traced_in:\n"
	"	push %rbx\n"
	"	push %r12\n"
	"	push %r13\n"
	"	mov %rax, %r13\n"
	"	mov %eax, %ecx\n"
	"	and $3, %ecx\n"
	"	lea (%rdi,%rcx,8), %r12\n"
	"	imul $31, (%r12), %rbx\n"
	"	add %r13, %rbx\n"
	"	movzbl %bl, %edi\n"
	"	call helper\n"
	"	add %rax, %rbx\n"
	PT_TRACED_TAIL
	"traced_neg:\n"
	"	mov $-1, %rax\n"
	"	ret\n"
	".size traced, . - traced\n"
	".type traced_alt, @function\n"
	"traced_alt:\n"
	"	mov %rsi, %rax\n"
	"	jmp traced_in\n"
	".size traced_alt, . - traced_alt\n");

#include "pt_crash.c"
