/* No room for a code cache (tests/e2e/test_trap_patch.py): every free MiB
 * from 16 MiB to 2 GiB is reserved (PROT_NONE), so nothing of 24 MiB is free
 * within 1 GiB of `traced` (the text at 4 MiB), and an attached trace falls
 * back from the patch trap, saying why and (-v) what lies there.
 *
 * Usage: pt_noroom CALLS.  Prints "ready PID" once the reservations are
 * made, waits for a byte on stdin, calls `traced` CALLS times, prints
 * the sum and waits for the end of stdin.  Exit 0 (1 when nothing could be
 * reserved).  Range: `traced`. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

__attribute__((noinline)) long traced(long x)
{
	return x * 3 + 1;
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 10, sum = 0, made = 0;
	for (unsigned long a = 0x1000000; a < 0x80000000ul; a += 0x100000)
		made += mmap((void *)a, 0x100000, PROT_NONE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1,
			     0) != MAP_FAILED;
	if (!made)
		return 1;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	char c;
	if (read(0, &c, 1) < 0)
		return 1;
	for (long i = 0; i < calls; i++)
		sum += traced(i);
	printf("%ld\n", sum);
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	return 0;
}
