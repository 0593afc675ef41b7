// Probe trap: a C++ exception thrown by a callee outside the range and
// caught inside it.  `traced` calls `thrower` (out of range) in a try block;
// thrower throws for one value in 3, and the unwinder resumes `traced` at
// its landing pad (from .gcc_except_table), an entry no branch reaches.
// Usage: pt_except [N] (default 30).  Prints a checksum; exit 0.
// Range: `traced`.
#include <cstdio>
#include <cstdlib>

__attribute__((noinline)) int thrower(int i)
{
	if (i % 3 == 0)
		throw i * 7;
	return i + 1;
}

extern "C" __attribute__((noinline)) int traced(int i)
{
	int r;
	try {
		r = thrower(i);
	} catch (int e) {
		r = e ^ 0x55;
	}
	return r * 2 + 1;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 30;
	unsigned sum = 0;
	for (int i = 0; i < n; i++)
		sum = sum * 33 + (unsigned)traced(i);
	std::printf("checksum %08x\n", sum);
	return 0;
}
