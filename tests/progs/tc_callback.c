/* A callback from a callee outside the range back into it, while the range
 * is active higher on the stack: `traced` calls libc's qsort (out of the
 * range), which calls the comparator `traced_cmp` (in the range), which
 * calls the helper `traced_key` (in the range) for each side; qsort then
 * returns into `traced`, which folds the sorted array.  All three sit in
 * section .text.gbrange: the range is their span.  Usage: tc_callback
 * [ROUNDS [N]] (defaults 4, 48; N <= 256).  Prints a checksum; exit 0 (2 on
 * a bad N).  Range: span of traced, traced_cmp, traced_key. */
#include <stdio.h>
#include <stdlib.h>

#define RANGE __attribute__((noinline, section(".text.gbrange")))

static int arr[256];

RANGE int traced_key(int x)
{
	return (x * 37) ^ (x >> 3);
}

RANGE int traced_cmp(const void *a, const void *b)
{
	int x = traced_key(*(const int *)a), y = traced_key(*(const int *)b);
	return (x > y) - (x < y);
}

RANGE unsigned long traced(int n)
{
	unsigned long sum = 0;
	qsort(arr, n, sizeof(arr[0]), traced_cmp);
	for (int i = 0; i < n; i++)
		sum = sum * 31 + (unsigned)arr[i];
	return sum;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 4, n = argc > 2 ? atoi(argv[2]) : 48;
	unsigned seed = 12345;
	unsigned long sum = 0;
	if (n < 1 || n > 256)
		return 2;
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < n; i++) {
			seed = seed * 1103515245 + 12345;
			arr[i] = (int)(seed >> 8) % 1000 - 500;
		}
		sum = sum * 7 + traced(n);
	}
	printf("checksum %lx\n", sum);
	return 0;
}
