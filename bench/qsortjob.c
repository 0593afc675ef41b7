/* Benchmark tracee: `qsortjob N` sorts N pseudo-random ints (default 1e6)
 * with libc's qsort; the hot function is the comparator `cmp_int` (range
 * `cmp_int`, ~9 instructions and 2 reads per call).  Prints a checksum of
 * the sorted array; exit 0.  Built -O2 -static -no-pie. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	int *v = malloc(n * sizeof(*v));
	unsigned long long s = 88172645463325252ull, sum = 0;

	if (!v || n < 1)
		return 1;
	for (long i = 0; i < n; i++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		v[i] = (int)(s >> 33);
	}
	qsort(v, n, sizeof(*v), cmp_int);
	for (long i = 0; i < n; i++)
		sum = sum * 31 + (unsigned)v[i];
	printf("%llx\n", sum);
	return 0;
}
