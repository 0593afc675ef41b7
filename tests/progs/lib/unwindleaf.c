/* The hot leaf of unwind_chain, in a shared library built without frame
 * pointers (-O2 -fomit-frame-pointer). */
__attribute__((noinline)) unsigned long leaf_hot(unsigned long x, long n)
{
	for (long i = 0; i < n; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL + (x >> 29);
	return x;
}
