/* A libc callback: qsort (out of range) calls the comparator `traced` (in
 * range) on a 24-element array.  Prints the sorted array; exit 0. */
#include <stdio.h>
#include <stdlib.h>

static int arr[24] = {17, 3, 99, -4, 0, 56, 23, 23, 8, 1, -50, 77,
		      12, 5, 64, 31, 2, 9, 44, 18, -1, 6, 70, 11};

__attribute__((noinline)) int traced(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

int main(void)
{
	qsort(arr, 24, sizeof(arr[0]), traced);
	for (int i = 0; i < 24; i++)
		printf("%d%c", arr[i], i == 23 ? '\n' : ' ');
	return 0;
}
