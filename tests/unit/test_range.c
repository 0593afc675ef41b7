/* Range parsing (common/parse.c) and description (common/parse.c): every form
 * of --range/--start/--end, every malformed one (one "gebpf:" line each),
 * --duration's decimal seconds, and the instruction-boundary check of a
 * range's START (decode/flow.c gb_flow_boundary). */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/parse.h"
#include "decode/flow.h"

/* Each table is one test: every case is checked in the one process (a
 * process per case, as a parameterized test makes, cost the sanitizer pass
 * ~0.3 CPU s a case: docs/testing.md "How scripts/test runs the suite"),
 * each failing case reported. */
struct addr_case {
	char s[48];
	uint64_t start, end;
};

static const struct addr_case addr_cases[] = {
	{ "401000-40101f", 0x401000, 0x40101f },
	{ "0x401000-0x40101f", 0x401000, 0x40101f },
	{ "0X401000-0XABCDEF", 0x401000, 0xabcdef },
	{ "0-ffffffffffffffff", 0, ~0ull },
	{ "10-10", 0x10, 0x10 },
	{ "0x10-20", 0x10, 0x20 },
};

Test(range, addr_forms)
{
	for (size_t i = 0; i < sizeof(addr_cases) / sizeof(addr_cases[0]); i++) {
		const struct addr_case *c = &addr_cases[i];
		struct gb_range_spec r;
		if (gb_range_parse("trace", c->s, &r)) {
			cr_expect(0, "%s: refused", c->s);
			continue;
		}
		cr_expect(r.kind == GB_RANGE_ADDR && r.has_start && r.has_end &&
			  r.start == c->start && r.end == c->end,
			  "%s: kind %d, start %#llx, end %#llx", c->s, (int)r.kind,
			  (unsigned long long)r.start, (unsigned long long)r.end);
	}
}

struct sym_case {
	char s[48], module[16], symbol[32], text[48];
};

static const struct sym_case sym_cases[] = {
	{ "main", "", "main", "main" },
	{ "libc.so.6:memcpy", "libc.so.6", "memcpy", "libc.so.6:memcpy" },
	{ "libc:clock_nanosleep", "libc", "clock_nanosleep", "libc:clock_nanosleep" },
	{ "a:b:c", "a:b", "c", "a:b:c" },
	{ "/a-b/lib-x.so:f", "/a-b/lib-x.so", "f", "/a-b/lib-x.so:f" }, /* dashes in a path */
	{ "_start", "", "_start", "_start" },
	{ "memcpy@GLIBC_2.14", "", "memcpy@GLIBC_2.14", "memcpy@GLIBC_2.14" },
	{ "deadbeef", "", "deadbeef", "deadbeef" },
	/* names as gdb shows them: a "::" is no module's colon */
	{ "app::Acc::add", "", "app::Acc::add", "app::Acc::add" },
	{ "node:node::Start(int, char**)", "node", "node::Start(int, char**)",
	  "node:node::Start(int, char**)" },
	{ "x:app::twice<long>", "x", "app::twice<long>", "x:app::twice<long>" },
	{ "f(int)", "", "f(int)", "f(int)" },
};

Test(range, symbol_forms)
{
	for (size_t i = 0; i < sizeof(sym_cases) / sizeof(sym_cases[0]); i++) {
		const struct sym_case *c = &sym_cases[i];
		struct gb_range_spec r;
		char text[600];
		if (gb_range_parse("trace", c->s, &r)) {
			cr_expect(0, "%s: refused", c->s);
			continue;
		}
		gb_range_describe(&r, text, sizeof(text));
		cr_expect(r.kind == GB_RANGE_SYM && !strcmp(r.module, c->module) &&
			  !strcmp(r.symbol, c->symbol) && !strcmp(text, c->text),
			  "%s: kind %d, module '%s' (want '%s'), symbol '%s' (want '%s'), "
			  "described '%s' (want '%s')", c->s, (int)r.kind, r.module, c->module,
			  r.symbol, c->symbol, text, c->text);
	}
}

struct bad_case {
	char s[48], line[128];   /* s "long:N": N-character forms built in the test */
};

static const struct bad_case bad_cases[] = {
	{ "", "gebpf: trace: --range '': empty range\n" },
	{ "-", "gebpf: trace: --range -: expected START-END in hex\n" },
	{ "10-", "gebpf: trace: --range 10-: expected START-END in hex\n" },
	{ "-10", "gebpf: trace: --range -10: expected START-END in hex\n" },
	{ "20-10", "gebpf: trace: --range 20-10: START is greater than END\n" },
	{ "g-10", "gebpf: trace: --range g-10: expected START-END in hex\n" },
	{ "10-2x", "gebpf: trace: --range 10-2x: expected START-END in hex\n" },
	{ "1-2-3", "gebpf: trace: --range 1-2-3: expected START-END in hex\n" },
	{ "0x-10", "gebpf: trace: --range 0x-10: expected START-END in hex\n" },
	{ "10000000000000000-20000000000000000",
	  "gebpf: trace: --range 10000000000000000-20000000000000000: expected START-END in hex\n" },
	{ ":main", "gebpf: trace: --range :main: expected MODULE:SYMBOL\n" },
	{ "libc:", "gebpf: trace: --range libc:: expected a symbol name\n" },
	{ "a b", "gebpf: trace: --range a b: not a symbol name or a START-END hex range\n" },
	{ "libc:mem cpy", "gebpf: trace: --range libc:mem cpy: not a symbol name or a START-END hex range\n" },
	/* Control characters are escaped: the error stays one line. */
	{ "hot\nbar", "gebpf: trace: --range hot\\nbar: not a symbol name or a START-END hex range\n" },
	{ "1\t-\x1b" "2", "gebpf: trace: --range 1\\t-\\x1b2: expected START-END in hex\n" },
	{ "long:sym", "" },
	{ "long:mod", "" },
	{ "long:hex", "" },
};

/* gb_range_parse(s) must refuse S (-EINVAL); what it wrote to stderr, in
 * a buffer to free. */
static char *refusal_of(const char *s, int *rc)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *saved = stderr, *f = open_memstream(&buf, &len);
	struct gb_range_spec r;
	cr_assert(f);
	stderr = f;
	*rc = gb_range_parse("trace", s, &r);
	stderr = saved;
	fclose(f);
	return buf;
}

Test(range, malformed)
{
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *c = &bad_cases[i];
		char s[400] = "";
		int rc;
		if (!strcmp(c->s, "long:sym")) {
			memset(s, 'a', 300);              /* a symbol of 300 characters */
		} else if (!strcmp(c->s, "long:mod")) {
			memset(s, 'm', 300);              /* a module of 298 characters */
			s[298] = ':';
		} else if (!strcmp(c->s, "long:hex")) {
			memset(s, '1', 80);               /* 111-1111...: START-END too long */
			s[3] = '-';
		} else {
			strcpy(s, c->s);
		}
		char *err = refusal_of(s, &rc);
		size_t n = strlen(err);
		cr_expect_eq(rc, -EINVAL, "%s: returned %d", s, rc);
		if (c->line[0])
			cr_expect_str_eq(err, c->line, "%s: wrote '%s', want '%s'", c->s, err, c->line);
		else    /* too long: still exactly one gebpf: line */
			cr_expect(n > 7 && !strncmp(err, "gebpf: trace: ", 14) &&
				  strchr(err, '\n') == err + n - 1, "%s: %s", c->s, err);
		free(err);
	}
}

Test(range, bounds)
{
	struct gb_range_spec r = { 0 };
	cr_assert_eq(gb_range_set_bound("trace", &r, false, "0x401000"), 0);
	cr_assert(r.kind == GB_RANGE_ADDR && r.has_start && !r.has_end && r.start == 0x401000);
	char text[64];
	gb_range_describe(&r, text, sizeof(text));
	cr_assert_str_eq(text, "0x401000-0xffffffffffffffff");
	cr_assert_eq(gb_range_set_bound("trace", &r, true, "40101f"), 0);
	cr_assert(r.has_end && r.end == 0x40101f);
	struct gb_range_spec e = { 0 };
	cr_assert_eq(gb_range_set_bound("trace", &e, true, "1000"), 0);
	cr_assert(!e.has_start && e.has_end && e.end == 0x1000);
	struct gb_range_spec none = { 0 };
	gb_range_describe(&none, text, sizeof(text));
	cr_assert_str_eq(text, "(all)");
}

Test(range, bad_bounds, .init = cr_redirect_stderr)
{
	struct gb_range_spec r = { 0 }, s;
	cr_assert_eq(gb_range_set_bound("trace", &r, false, "zz"), -EINVAL);
	cr_assert_eq(gb_range_set_bound("trace", &r, true, ""), -EINVAL);
	cr_assert_eq(gb_range_set_bound("trace", &r, false, "0x2000"), 0);
	cr_assert_eq(gb_range_set_bound("trace", &r, true, "0x1000"), -EINVAL);
	cr_assert_eq(gb_range_parse("trace", "main", &s), 0);
	cr_assert_eq(gb_range_set_bound("trace", &s, false, "0x1000"), -EINVAL);
	fflush(stderr);
	cr_assert_stderr_eq_str(
		"gebpf: trace: --start zz: expected a hex address\n"
		"gebpf: trace: --end : expected a hex address\n"
		"gebpf: trace: --end 0x1000: START is greater than END\n"
		"gebpf: trace: --start 0x1000: --start/--end cannot be combined with a symbol range\n");
}

Test(parse, seconds_decimal_and_float)
{
	static const char *good[] = { "0", "1", "1.5", ".5", "5.", "10.25", "0003", "1e3", "1E3",
				      "2.5e-1", "1e+2", "1e9", "9223372036", "1e-999" };
	static const double val[] = { 0, 1, 1.5, 0.5, 5, 10.25, 3, 1000, 1000, 0.25, 100, 1e9,
				      9223372036.0, 0 };
	static const char *bad[] = { "", ".", "0x10", "0X1p4", "-1", "+1", "inf", "nan", "1.2.3",
				     " 1", "1 ", "1s", "e3", "1e", "1e+", "1e3.5", ".e1", "1ee2" };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		double d = -1;
		cr_assert_eq(gb_parse_seconds(good[i], &d), 0, "%s", good[i]);
		cr_assert_float_eq(d, val[i], 1e-12, "%s", good[i]);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		double d = -1;
		cr_assert_eq(gb_parse_seconds(bad[i], &d), -EINVAL, "'%s' accepted", bad[i]);
	}
}

/* One bound whatever the spelling (issue 23: 1e9 was refused while
 * 99999999999999999999 was taken). */
Test(parse, seconds_overflow_is_refused)
{
	static const char *big[] = { "99999999999999999999", "1e10", "9223372037", "1e999",
				     "10000000000.0" };
	for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
		double d = -1;
		cr_assert_eq(gb_parse_seconds(big[i], &d), -ERANGE, "'%s'", big[i]);
		cr_assert_float_eq(d, -1, 0, "'%s' stored", big[i]);
	}
}

Test(parse, u64_overflow_is_erange)
{
	uint64_t v = 7;
	cr_assert_eq(gb_parse_u64("18446744073709551615", &v), 0);
	cr_assert_eq(v, UINT64_MAX);
	cr_assert_eq(gb_parse_u64("18446744073709551616", &v), -ERANGE);
	cr_assert_eq(gb_parse_u64("0x10000000000000000", &v), -ERANGE);
	cr_assert_eq(gb_parse_u64("99999999999999999999x", &v), -EINVAL);
	cr_assert_eq(v, UINT64_MAX);
}

Test(parse, option_messages, .init = cr_redirect_stderr)
{
	double d;
	uint64_t n;
	cr_assert_eq(gb_parse_duration_opt("trace", "--duration", "99999999999999999999", &d), -ERANGE);
	cr_assert_eq(gb_parse_duration_opt("trace", "--duration", "0", &d), -EINVAL);
	cr_assert_eq(gb_parse_duration_opt("sample", "--duration", "1e9", &d), 0);
	cr_assert_float_eq(d, 1e9, 0);
	cr_assert_eq(gb_parse_count_opt("trace", "--max-insns", "99999999999999999999", true, &n),
		     -ERANGE);
	cr_assert_eq(gb_parse_count_opt("trace", "--max-insns", "0", true, &n), -EINVAL);
	cr_assert_eq(gb_parse_count_opt("trace", "--max-events", "0", false, &n), 0);
	cr_assert_eq(n, 0);
	cr_assert_eq(gb_parse_count_opt("trace", "--max-events", "1e6", false, &n), -EINVAL);
	fflush(stderr);
	cr_assert_stderr_eq_str(
		"gebpf: trace: --duration 99999999999999999999: more than 9223372036 seconds (292 years)\n"
		"gebpf: trace: --duration 0: expected a positive number of seconds (as 1.5 or 1e3)\n"
		"gebpf: trace: --max-insns 99999999999999999999: too large (at most 18446744073709551615)\n"
		"gebpf: trace: --max-insns 0: expected a positive whole number\n"
		"gebpf: trace: --max-events 1e6: expected a non-negative whole number\n");
}

/* The [MODULE:]SYMBOL part alone, for another option (snap --at). */
Test(range, sym_spec_other_option, .init = cr_redirect_stderr)
{
	struct gb_range_spec r;
	cr_assert_eq(gb_sym_spec_parse("snap", "--at", "libc:malloc", &r), 0);
	cr_assert(r.kind == GB_RANGE_SYM && !strcmp(r.module, "libc") && !strcmp(r.symbol, "malloc"));
	cr_assert_eq(gb_sym_spec_parse("snap", "--at", "snap_here", &r), 0);
	cr_assert(r.kind == GB_RANGE_SYM && !r.module[0] && !strcmp(r.symbol, "snap_here"));
	cr_assert_eq(gb_sym_spec_parse("snap", "--at", "a b", &r), -EINVAL);
	fflush(stderr);
	cr_assert_stderr_eq_str("gebpf: snap: --at a b: not a symbol name or an address\n");
}

/* The head of python3.11's PyLong_AsSsize_t: sub rsp,8 (4 bytes); test
 * rdi,rdi (3); je rel32 (6); ret. */
static const uint8_t fn_head[] = { 0x48, 0x83, 0xec, 0x08, 0x48, 0x85, 0xff,
				   0x0f, 0x84, 0xdf, 0x97, 0xf1, 0xff, 0xc3 };

Test(range, start_boundary)
{
	uint64_t prev, next;
	static const uint64_t at[] = { 0x1000, 0x1004, 0x1007, 0x100d };
	for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
		cr_assert_eq(gb_flow_boundary(0x1000, fn_head, sizeof(fn_head), at[k], &prev, &next), 0,
			     "%#lx", (unsigned long)at[k]);
		cr_assert(prev == at[k] && next == at[k]);
	}
	cr_assert_eq(gb_flow_boundary(0x1000, fn_head, sizeof(fn_head), 0x1005, &prev, &next), 1);
	cr_assert(prev == 0x1004 && next == 0x1007, "%#lx %#lx", (unsigned long)prev,
		  (unsigned long)next);
	cr_assert_eq(gb_flow_boundary(0x1000, fn_head, sizeof(fn_head), 0x100c, &prev, &next), 1);
	cr_assert(prev == 0x1007 && next == 0x100d);
	/* The instruction holding addr may be cut short by n: its length is
	 * still known only from whole bytes, so a truncated one is refused. */
	cr_assert_eq(gb_flow_boundary(0x1000, fn_head, 9, 0x1008, &prev, &next), -EINVAL);
	cr_assert_eq(prev, 0x1007);
	/* 0x06 (push es) is not an instruction in 64-bit mode. */
	static const uint8_t bad[] = { 0x06, 0x90, 0x90 };
	cr_assert_eq(gb_flow_boundary(0x2000, bad, sizeof(bad), 0x2001, &prev, &next), -EINVAL);
	cr_assert_eq(prev, 0x2000);
}
