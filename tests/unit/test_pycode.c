/* Naming Python frames without a Python process: the 3.11 location table
 * (co_linetable) against the lines CPython itself gives, and the module
 * names made from file names (user/sample/pycode.h).  The profile's Python
 * locations: one per (function, line), named "module.qualname".
 * Run: .output/unit-tests --filter 'pycode/...' */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/profile.h"
#include "sample/pycode.h"

/* co_linetable of f() below as /usr/bin/python3.11 (3.11.2) compiles it,
 * and co_positions()'s line of each instruction (-1: no location):
 *
 *   def f(a, b):                  # line 2
 *       x = a + b
 *       if x > 3:
 *           y = [i
 *                for i in range(x)]
 *       else:
 *           y = None
 *   (three empty lines)
 *       z = (a,                   # line 12
 *            b,
 *            x)
 *       try:
 *           return len(y) + z[0]
 *       except TypeError:
 *           return -1
 *
 * It has short (0-9), one-line (10-12), long (14) and no-location (15)
 * entries. */
static const uint8_t table[] = {
	0x80, 0x00, 0xd8, 0x08, 0x09, 0x88, 0x41, 0x89, 0x05, 0x80, 0x41, 0xd8, 0x07, 0x08, 0x88,
	0x31, 0x82, 0x75, 0x80, 0x75, 0xf0, 0x02, 0x01, 0x0d, 0x20, 0xf0, 0x00, 0x01, 0x0d, 0x20,
	0xdd, 0x16, 0x1b, 0x98, 0x41, 0x91, 0x68, 0x94, 0x68, 0xf0, 0x03, 0x01, 0x0d, 0x20, 0xf1,
	0x00, 0x01, 0x0d, 0x20, 0xf4, 0x00, 0x01, 0x0d, 0x20, 0x88, 0x01, 0x88, 0x01, 0xf0, 0x06,
	0x00, 0x0d, 0x11, 0x88, 0x01, 0xf0, 0x08, 0x00, 0x0a, 0x0b, 0xd8, 0x09, 0x0a, 0xd8, 0x09,
	0x0a, 0xf0, 0x05, 0x02, 0x09, 0x0c, 0x80, 0x41, 0xf0, 0x06, 0x03, 0x05, 0x12, 0xdd, 0x0f,
	0x12, 0x90, 0x31, 0x89, 0x76, 0x8c, 0x76, 0x98, 0x01, 0x98, 0x21, 0x9c, 0x04, 0x89, 0x7d,
	0xd0, 0x08, 0x1c, 0xf8, 0xdd, 0x0b, 0x14, 0xf0, 0x00, 0x01, 0x05, 0x12, 0xf0, 0x00, 0x01,
	0x05, 0x12, 0xf0, 0x00, 0x01, 0x05, 0x12, 0xd8, 0x0f, 0x11, 0x88, 0x72, 0x88, 0x72, 0xf0,
	0x03, 0x01, 0x05, 0x12, 0xf8, 0xf8, 0xf8,
};
static const int lines[] = {
	2, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5, 5,
	5, 5, 5, 5, 5, 5, 5, 5, 8, 8, 12, 13, 14, 12, 12, 15, 16, 16, 16, 16, 16, 16, 16, 16, 16,
	16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, -1, 17, 17, 17, 17, 17, 17, 17,
	17, 17, 18, 18, 18, 17, -1, -1, -1,
};

Test(pycode, line_table_matches_cpython)
{
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		if (lines[i] < 0)
			continue;   /* no location: gebpf keeps the line before */
		cr_assert_eq(gb_pycode_line(table, sizeof(table), 2, (int32_t)i), lines[i],
			     "instruction %zu: line %d, expected %d", i,
			     gb_pycode_line(table, sizeof(table), 2, (int32_t)i), lines[i]);
	}
	/* A frame that has not started: its first line. */
	cr_assert_eq(gb_pycode_line(table, sizeof(table), 2, -1), 2);
	/* Past the end, or an unreadable table: the last line known. */
	cr_assert_eq(gb_pycode_line(NULL, 0, 7, 3), 7);
}

static void mod(const char *file, const char *want)
{
	char buf[256];
	gb_pycode_module(file, buf, sizeof(buf));
	cr_assert_str_eq(buf, want, "%s -> %s, expected %s", file, buf, want);
}

Test(pycode, module_names_from_file_names)
{
	mod("/usr/lib/python3.11/json/decoder.py", "json.decoder");
	mod("/usr/lib/python3.11/hashlib.py", "hashlib");
	mod("/usr/lib/python3/dist-packages/yaml/__init__.py", "yaml");
	mod("/home/u/.venv/lib/python3.11/site-packages/pkg/sub/mod.py", "pkg.sub.mod");
	mod("/srv/app/work.py", "work");
	mod("work.py", "work");
	mod("<frozen importlib._bootstrap>", "importlib._bootstrap");
	mod("<string>", "<string>");
}

Test(pycode, profile_python_locations_by_function_and_line)
{
	struct gb_profile *p = gb_profile__new(NULL, NULL, false);
	struct gb_pyfunc f = { .id = 1, .name = "work.spin", .file = "/srv/work.py",
			       .first_line = 10 };
	struct gb_profile_frame fr[2] = {
		{ .py = &f, .line = 12 },
		{ .addr = 0x401000, .ret = true },
	};
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	cr_assert(p && out);
	cr_assert_eq(gb_profile__add_frames(p, 1, "x", NULL, 0, fr, 2), 0);
	cr_assert_eq(gb_profile__add_frames(p, 1, "x", NULL, 0, fr, 2), 0);
	fr[0].line = 13;
	cr_assert_eq(gb_profile__add_frames(p, 1, "x", NULL, 0, fr, 2), 0);
	/* two lines of one function, one native frame */
	cr_assert_eq(gb_profile__nlocs(p), 3);
	const struct gb_profile_loc *l = gb_profile__loc(p, 1);
	cr_assert(l->python);
	cr_assert_str_eq(l->func, "work.spin");
	cr_assert_str_eq(l->file, "/srv/work.py");
	cr_assert_eq(l->line, 12);
	cr_assert_eq(l->start_line, 10);
	cr_assert_eq(gb_profile__folded(p, out), 0);
	fclose(out);
	cr_assert_str_eq(buf, "[unknown];work.spin 3\n");
	free(buf);
	gb_profile__free(p);
}

/* A name longer than the buffer is cut at a whole UTF-8 character: a
 * Python function named in another script (--folded's lines are UTF-8). */
Test(pycode, a_long_name_is_cut_at_a_whole_character)
{
	char func[] = "mod.f\xc3\xa9\xc3\xa9";  /* "mod.féé": 9 bytes */
	struct gb_profile_loc l = { .python = true, .func = func };
	char buf[9];
	gb_profile__loc_name(&l, buf, sizeof(buf)); /* 8 fit: "mod.fé" and half an é */
	cr_assert_str_eq(buf, "mod.f\xc3\xa9");
	char big[16];
	gb_profile__loc_name(&l, big, sizeof(big));
	cr_assert_str_eq(big, func);
	char three[] = "\xe2\x82\xac\xe2\x82\xac";     /* "€€" */
	l.func = three;
	char b5[6];
	gb_profile__loc_name(&l, b5, sizeof(b5)); /* 5 fit: one € and two thirds */
	cr_assert_str_eq(b5, "\xe2\x82\xac");
}
