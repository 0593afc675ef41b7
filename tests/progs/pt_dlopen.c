/* Probe trap: a range in a library loaded after the trace starts.  The
 * program runs a little (1000 loop iterations), then dlopens libptdl.so (found through its
 * RUNPATH $ORIGIN/lib) and calls ptdl_work CALLS times.  Built by its own
 * rule in progs.mk (dynamic PIE).  Usage: pt_dlopen [CALLS] (default 20).
 * Prints a checksum; exit 0.  Range: `libptdl:ptdl_work`. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 20;
	static long slot[4] = {1, 2, 3, 4};
	volatile long warm = 0;
	for (long k = 0; k < 1000; k++)
		warm += k;
	void *h = dlopen("libptdl.so", RTLD_NOW);
	if (!h) {
		fprintf(stderr, "pt_dlopen: %s\n", dlerror());
		return 1;
	}
	long (*work)(long *, long) = (long (*)(long *, long))dlsym(h, "ptdl_work");
	unsigned long sum = 0;
	for (long i = 0; i < calls; i++)
		sum = sum * 7 + (unsigned long)work(slot, i);
	printf("checksum %lx\n", sum);
	dlclose(h);
	return 0;
}
