/* libptdl.so, dlopened by tests/progs/pt_dlopen.c after it starts: a
 * range in a library that is not mapped when the trace begins
 * (`--range libptdl:ptdl_work`). */
__attribute__((noinline)) long ptdl_work(long *slot, long i)
{
	long v = slot[i & 3] * 17 + i;
	slot[i & 3] = v & 0xfffff;
	return v & 0xfff;
}
