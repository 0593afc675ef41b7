/* libtrapfoo.so, the shared library of tests/progs/trap_dyn.c: the page
 * trap on a range inside a shared library (`libtrapfoo:foo_hot`).
 * foo_hot is small and branch-free; foo_cold runs out-of-range work in the
 * same library (on other pages: foo_hot has a page-aligned section). */

__attribute__((noinline, section(".text.foo_hot"), aligned(4096)))
long foo_hot(long *slot, long i)
{
	long v = slot[i & 7] * 31 + i;
	slot[i & 7] = v & 0xffffff;
	return v & 0xffff;
}

__attribute__((noinline)) long foo_cold(long n)
{
	volatile long s = 0;
	for (long k = 0; k < n; k++)
		s += k;
	return s;
}
