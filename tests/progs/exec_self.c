/* exec_self [N]: calls `traced`, prints a line, then execs itself with N-1
 * until N is 0 (default 2: three images).  The range must be re-trapped in
 * each new image.  Exit 0. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((noinline)) long traced(long x) { long s = 0; for (int i = 0; i < 5; i++) s += x * i; return s; }
int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 2;
	printf("gen %ld: %ld\n", n, traced(n));
	fflush(stdout);
	if (n > 0) { char b[16]; snprintf(b, sizeof b, "%ld", n - 1); execl("/proc/self/exe", argv[0], b, (char *)0); }
	return 0;
}
