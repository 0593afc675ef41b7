/* Thread-local storage through %fs: `traced` reads and writes a __thread
 * array and a __thread counter (fs-relative addresses must include the fs
 * base).  Prints a checksum; exit status 0. */
#include <stdio.h>

__thread long tls_counter = 5;
__thread int tls_arr[8] = {1, 2, 3, 4, 5, 6, 7, 8};

__attribute__((noinline)) long traced(int n)
{
	long s = 0;
	for (int i = 0; i < n; i++) {
		tls_arr[i & 7] += i;
		s += tls_arr[(i * 3) & 7];
	}
	tls_counter += s;
	return tls_counter;
}

int main(void)
{
	printf("tls %ld\n", traced(12));
	return 0;
}
