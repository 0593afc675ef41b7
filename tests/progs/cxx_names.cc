// Names as gdb shows them (docs/trace.md "Range", docs/sample.md "Names"):
// a namespace, a class, an overload pair, a template and a function of the
// global namespace, each hot in turn.
// `app::Acc::add(long)` is the one function of that name, `app::mix` has
// two overloads, `app::twice<long>` is a template's instance.
// Usage: cxx_names [N] (default 2000000).  Prints a checksum; exit 0.
#include <cstdio>
#include <cstdlib>

namespace app {
struct Acc {
	long v = 1;
	__attribute__((noinline)) void add(long x) { v = v * 31 + (x ^ (v >> 7)); }
};

__attribute__((noinline)) long mix(long a) { return a * 7 + 3; }
__attribute__((noinline)) long mix(long a, long b) { return a * 5 + b; }

template <typename T> __attribute__((noinline)) T twice(T x) { return x + x + 1; }
} // namespace app

// Of the global namespace: `spread` as gdb takes it, without its parameters.
__attribute__((noinline)) long spread(long a) { return a ^ (a >> 3); }

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000000;
	app::Acc acc;
	long s = 0;
	for (long i = 0; i < n; i++) {
		acc.add(i);
		s += app::mix(i) + app::mix(i, s & 0xff) + app::twice<long>(i & 0xffff) + spread(i);
	}
	std::printf("checksum %ld %ld\n", acc.v, s);
	return 0;
}
