// C++ exceptions and the range, both ways: `traced` calls `thrower` (out of
// the range) in a try block.  thrower throws an int for one value in 3,
// caught inside `traced` at its landing pad; and a long for one value in 5
// (not a multiple of 3), which `traced` does not catch: the unwinder runs
// the destructor of traced's `Guard` at a cleanup landing pad inside the
// range, then _Unwind_Resume carries it through, and main (outside) catches
// it.  Built dynamic (no PIE) with libstdc++ and libgcc linked in
// statically (progs.mk): a static C++ program's first throw makes libgcc
// sort every FDE of the binary, millions of instructions under
// `--trap none`; a dynamic one finds its FDE through the loader.
// Usage: tc_except [N] (default 30).  Prints a checksum; exit 0.
// Range: `traced`.
#include <cstdio>
#include <cstdlib>

static volatile long guards;

struct Guard {
	int v;
	~Guard() { guards += v; }
};

__attribute__((noinline)) int thrower(int i)
{
	if (i % 3 == 0)
		throw i * 7;
	if (i % 5 == 0)
		throw (long)i * 11;
	return i + 1;
}

extern "C" __attribute__((noinline)) int traced(int i)
{
	Guard g{i};
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
	unsigned sum = 0, through = 0;
	for (int i = 0; i < n; i++) {
		try {
			sum = sum * 33 + (unsigned)traced(i);
		} catch (long e) {
			sum = sum * 33 + (unsigned)e;
			through++;
		}
	}
	std::printf("checksum %08x through %u guards %ld\n", sum, through, (long)guards);
	return 0;
}
