/* exec_other [PROG ARG...]: calls `traced` (page-aligned: at another
 * address than any other test program's `traced`), prints a line, then
 * execs PROG, whose own `traced` the range then names: an exec that moves
 * the range.  Exit: PROG's (0 without one). */
#include <stdio.h>
#include <unistd.h>
__attribute__((noinline, aligned(4096))) long traced(long x) { long s = 0; for (int i = 0; i < 3; i++) s += x * i; return s; }
int main(int argc, char **argv) {
	printf("exec_other: %ld\n", traced(argc));
	fflush(stdout);
	if (argc > 1) { execv(argv[1], argv + 1); perror("exec_other: execv"); return 1; }
	return 0;
}
