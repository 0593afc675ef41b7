/* setjmp/longjmp: `traced` calls setjmp, descends three levels (in range)
 * and longjmps back; setjmp then returns 1 and `traced` continues.  The
 * jmp_buf store and the longjmp restore are libc (out of range).  Both
 * functions live in section .text.gbrange: the test traces their span.
 * Prints the result; exit 0. */
#include <setjmp.h>
#include <stdio.h>

static jmp_buf env;
static volatile int depth_reached;

__attribute__((noinline, section(".text.gbrange"))) void traced_dive(int depth)
{
	volatile int local = depth * 2;
	depth_reached = local;
	if (depth == 3)
		longjmp(env, depth);
	traced_dive(depth + 1);
}

__attribute__((noinline, section(".text.gbrange"))) int traced(void)
{
	volatile int round = 0;
	int r = setjmp(env);
	round++;
	if (r == 0)
		traced_dive(0);
	return r * 100 + round + depth_reached;
}

int main(void)
{
	printf("setjmp %d\n", traced());
	return 0;
}
