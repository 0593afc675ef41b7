/* Looks like a CPython 3.10 to gebpf sample (its name starts with "python",
 * it defines _PyRuntime and Py_Version = 0x030a0cf0): a Python whose layout
 * gebpf does not know, which must get native stacks and one warning
 * (tests/e2e/test_sample_python.py).  Spins for argv[1] seconds. */
#include <stdlib.h>
#include <time.h>

char _PyRuntime[4096];
const unsigned long Py_Version = 0x030a0cf0;   /* 3.10.12 final */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static unsigned long spin(unsigned long n)
{
	volatile unsigned long s = 0;
	for (unsigned long i = 0; i < n; i++)
		s += i * i + (unsigned long)_PyRuntime[i & 4095];
	return s;
}

int main(int argc, char **argv)
{
	double end = now() + (argc > 1 ? atof(argv[1]) : 1.0);
	while (now() < end)
		spin(1000000);
	return 0;
}
