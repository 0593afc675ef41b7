/* A switch compiled to a jump table (an indirect jmp through a table in
 * .rodata): `traced` runs a tiny bytecode.  Prints the result; exit 0. */
#include <stdio.h>

static const unsigned char code[] = {0, 3, 1, 4, 2, 5, 6, 7, 3, 1, 0, 2, 8, 9, 4, 6, 5, 7, 9};
volatile long sink;

__attribute__((noinline)) long traced(const unsigned char *pc, int n, long acc)
{
	for (int i = 0; i < n; i++) {
		switch (pc[i]) {
		case 0: acc += 1; break;
		case 1: acc *= 3; break;
		case 2: acc -= 7; break;
		case 3: acc ^= 0x55; break;
		case 4: acc <<= 1; break;
		case 5: acc >>= 1; break;
		case 6: acc += sink; break;
		case 7: sink = acc; break;
		case 8: acc = -acc; break;
		default: acc |= 0x100; break;
		}
	}
	return acc;
}

int main(void)
{
	printf("switch %ld\n", traced(code, sizeof(code), 2));
	return 0;
}
