/* Names people read (user/sym/demangle.c, user/sym/perfmap.c): C++ and Rust
 * names demangled, and code made at run time named from its runtime's
 * /tmp/perf-PID.map as it grows. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sym/demangle.h"
#include "sym/perfmap.h"

static char *buf;
static size_t cap;

static void fini_names(void)
{
	free(buf);
	buf = NULL;
	cap = 0;
}

TestSuite(demangle, .fini = fini_names);

Test(demangle, cxx_names_read_as_gdb_shows_them)
{
	cr_assert_str_eq(gb_demangle("_ZN4node5StartEiPPc", &buf, &cap), "node::Start(int, char**)");
	cr_assert_str_eq(gb_demangle("_ZN2v88internal23Runtime_DateCurrentTimeEiPmPNS0_7IsolateE",
				     &buf, &cap),
			 "v8::internal::Runtime_DateCurrentTime(int, unsigned long*, "
			 "v8::internal::Isolate*)");
}

Test(demangle, rust_legacy_and_v0)
{
	cr_assert_str_eq(gb_demangle("_ZN3app3Acc3add17h0123456789abcdefE", &buf, &cap),
			 "app::Acc::add", "the legacy hash dropped");
	cr_assert_str_eq(gb_demangle("_RNvCs1234_3app4main", &buf, &cap), "app::main");
}

Test(demangle, other_names_as_they_are)
{
	const char *c = "memcpy", *odd = "_Zfoo", *r = "_R";
	cr_assert_eq(gb_demangle(c, &buf, &cap), c);
	cr_assert_eq(gb_demangle(odd, &buf, &cap), odd, "refused: itself");
	cr_assert_eq(gb_demangle(r, &buf, &cap), r);
	cr_assert_null(gb_demangle(NULL, &buf, &cap));
}

/* --- perf maps --- */

static char path[64];
static struct gb_perfmap *pm;

static void fini_map(void)
{
	gb_perfmap__free(pm);
	pm = NULL;
	if (path[0])
		unlink(path);
}

TestSuite(perfmap, .fini = fini_map);

static void append(const char *s)
{
	FILE *f = fopen(path, "a");
	cr_assert_not_null(f);
	fputs(s, f);
	fclose(f);
}

static void open_map(void)
{
	strcpy(path, "/tmp/gb-perfmap-XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	close(fd);
	pm = gb_perfmap__open_file(path, "/tmp/perf-42.map");
	cr_assert_not_null(pm);
}

static const char *at(uint64_t a, uint64_t *start, uint64_t *size)
{
	static uint64_t s0, z0;
	return gb_perfmap__lookup(pm, a, start ? start : &s0, size ? size : &z0);
}

Test(perfmap, names_pieces_by_address)
{
	open_map();
	append("7f0000001000 100 JS:*hot /app/x.js:3:10\n"
	       "0x7f0000002000 0x40 LazyCompile:~cold /app/x.js:9\n"
	       "7f0000000800 10 Builtin:Stub\n");
	uint64_t s, z;
	cr_assert_str_eq(at(0x7f0000001000, &s, &z), "JS:*hot /app/x.js:3:10");
	cr_assert_eq(s, 0x7f0000001000);
	cr_assert_eq(z, 0x100);
	cr_assert_str_eq(at(0x7f00000010ff, NULL, NULL), "JS:*hot /app/x.js:3:10");
	cr_assert_null(at(0x7f0000001100, NULL, NULL), "past its end");
	cr_assert_str_eq(at(0x7f000000203f, NULL, NULL), "LazyCompile:~cold /app/x.js:9", "0x allowed");
	cr_assert_str_eq(at(0x7f0000000805, NULL, NULL), "Builtin:Stub", "the file's order is no matter");
	cr_assert_null(at(0x7f00000007ff, NULL, NULL));
	cr_assert_str_eq(gb_perfmap__name(pm), "/tmp/perf-42.map");
}

Test(perfmap, read_again_as_it_grows_a_later_line_wins)
{
	open_map();
	cr_assert_null(at(0x1000, NULL, NULL), "empty");
	append("1000 100 first\n");
	cr_assert_str_eq(at(0x1010, NULL, NULL), "first");
	/* the runtime reused the memory: the later piece holds the address */
	append("1000 20 second\n");
	cr_assert_str_eq(at(0x1010, NULL, NULL), "second");
	cr_assert_str_eq(at(0x1030, NULL, NULL), "first", "the rest still the first's");
	/* a line being written: named once its newline is there */
	append("2000 10 thi");
	cr_assert_null(at(0x2000, NULL, NULL));
	append("rd\n");
	cr_assert_str_eq(at(0x2000, NULL, NULL), "third");
}

Test(perfmap, lines_that_are_not_pieces_are_skipped)
{
	open_map();
	append("garbage\n1000 0 empty\n1000\n1000 10\nzz 10 x\n3000 10 ok name with spaces\n");
	cr_assert_null(at(0x1000, NULL, NULL));
	cr_assert_str_eq(at(0x3000, NULL, NULL), "ok name with spaces");
}

Test(perfmap, a_process_without_a_map_names_nothing)
{
	pm = gb_perfmap__open(getpid());
	cr_assert_not_null(pm);
	char want[64];
	snprintf(want, sizeof(want), "/tmp/perf-%d.map", (int)getpid());
	cr_assert_str_eq(gb_perfmap__name(pm), want, "this process is in the host's pid namespace");
	cr_assert_null(at((uint64_t)(uintptr_t)&want, NULL, NULL));
}
