/* A dynamically linked PIE program whose hot function lives in a shared
 * library (tests/progs/lib/trapfoo.c -> progs/lib/libtrapfoo.so, found
 * through RUNPATH $ORIGIN/lib): the page trap on `libtrapfoo:foo_hot`, and on
 * `trap_dyn:dyn_hot` (a range in a PIE executable).  Built by its own rule in
 * tests/progs/progs.mk (not static).
 * Usage: trap_dyn [CALLS [FILL]] (defaults 50, 200).  Prints a checksum;
 * exit 0. */
#include <stdio.h>
#include <stdlib.h>

long foo_hot(long *slot, long i);
long foo_cold(long n);

__attribute__((noinline, section(".text.dyn_hot"), aligned(4096)))
long dyn_hot(long *slot, long i)
{
	slot[8] += i ^ slot[8];
	return slot[8];
}

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 50;
	long fill = argc > 2 ? atol(argv[2]) : 200;
	static long slot[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
	unsigned long sum = 0;

	for (long i = 0; i < calls; i++) {
		sum += (unsigned long)foo_cold(fill);
		sum += (unsigned long)foo_hot(slot, i);
		sum += (unsigned long)dyn_hot(slot, i);
	}
	printf("calls %ld sum %lu slot %ld %ld\n", calls, sum, slot[0], slot[8]);
	return 0;
}
