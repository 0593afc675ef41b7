/* Recursion: `traced` is a recursive Fibonacci with a stack array per
 * frame, so the trace holds nested call/ret and stack traffic at many
 * depths.  Prints the result; exit 0. */
#include <stdio.h>

__attribute__((noinline)) long traced(int n)
{
	volatile long frame[2] = {n, 0};
	if (frame[0] < 2)
		return frame[0];
	frame[1] = traced(n - 1) + traced(n - 2);
	return frame[1];
}

int main(void)
{
	printf("fib %ld\n", traced(10));
	return 0;
}
