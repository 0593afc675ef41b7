#include "common/parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

int gb_parse_hex(const char *s, uint64_t *out)
{
	char *end;
	if (!s || !*s)
		return -EINVAL;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	if (!isxdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 16);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

int gb_parse_u64(const char *s, uint64_t *out)
{
	char *end;
	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (*end || (errno && errno != ERANGE))
		return -EINVAL;
	if (errno == ERANGE)
		return -ERANGE;
	*out = v;
	return 0;
}

int gb_parse_seconds(const char *s, double *out)
{
	char *end;
	size_t digits = 0, dots = 0;
	const char *p = s;
	if (!s)
		return -EINVAL;
	/* [digits][.digits][e[+-]digits]: no hex, sign, blank, inf or nan. */
	for (; *p && *p != 'e' && *p != 'E'; p++) {
		if (isdigit((unsigned char)*p))
			digits++;
		else if (*p == '.' && !dots)
			dots++;
		else
			return -EINVAL; /* "0x10", "-1", "inf", " 1", "1s" */
	}
	if (!digits)
		return -EINVAL;
	if (*p) {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!*p)
			return -EINVAL;
		for (; *p; p++)
			if (!isdigit((unsigned char)*p))
				return -EINVAL;
	}
	errno = 0;
	double v = strtod(s, &end);
	if (*end || v < 0)
		return -EINVAL;
	if (v > GB_MAX_SECONDS) /* also an overflow to HUGE_VAL ("1e999") */
		return -ERANGE;
	*out = v; /* an underflow ("1e-999") is its value, 0 */
	return 0;
}

int gb_parse_duration_opt(const char *cmd, const char *opt, const char *s, double *out)
{
	int r = gb_parse_seconds(s, out);
	if (r == -ERANGE)
		gb_err("%s: %s %s: more than %.0f seconds (292 years)", cmd, opt, s, GB_MAX_SECONDS);
	else if (r || *out <= 0)
		gb_err("%s: %s %s: expected a positive number of seconds (as 1.5 or 1e3)", cmd, opt, s);
	return r ? r : *out <= 0 ? -EINVAL : 0;
}

int gb_parse_period_opt(const char *cmd, const char *opt, const char *arg, double *out)
{
	static const struct { char unit; double s; } units[] = {
		{ 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 },
	};
	char num[64];
	size_t n = strlen(arg);
	double mult = 1;

	snprintf(num, sizeof(num), "%s", arg);
	for (size_t i = 0; n && n < sizeof(num) && i < sizeof(units) / sizeof(units[0]); i++)
		if (num[n - 1] == units[i].unit) {
			num[n - 1] = 0;
			mult = units[i].s;
			break;
		}
	if (gb_parse_seconds(num, out) || *out <= 0 || *out * mult > GB_MAX_SECONDS) {
		gb_err("%s: %s %s: expected a positive period (as 10s, 1m, 1h, 1d or seconds)", cmd,
		       opt, arg);
		return -1;
	}
	*out *= mult;
	return 0;
}

int gb_parse_count_opt(const char *cmd, const char *opt, const char *s, bool positive,
		       uint64_t *out)
{
	int r = gb_parse_u64(s, out);
	if (r == -ERANGE)
		gb_err("%s: %s %s: too large (at most %llu)", cmd, opt, s, (unsigned long long)UINT64_MAX);
	else if (r || (positive && !*out))
		gb_err("%s: %s %s: expected a %s whole number", cmd, opt, s,
		       positive ? "positive" : "non-negative");
	return r ? r : positive && !*out ? -EINVAL : 0;
}

static int fail(const char *cmd, const char *opt, const char *arg, const char *why)
{
	gb_err("%s: %s %s: %s", cmd, opt, arg, why);
	return -EINVAL;
}

static bool is_symbol_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '$' || c == '@';
}

int gb_range_parse(const char *cmd, const char *s, struct gb_range_spec *out)
{
	memset(out, 0, sizeof(*out));
	if (!s || !*s)
		return fail(cmd, "--range", "''", "empty range");

	/* A colon makes it MODULE:SYMBOL, whose path may hold dashes
	 * (/usr/lib/x86_64-linux-gnu/libc.so.6:malloc); START-END never has one. */
	const char *dash = strchr(s, ':') ? NULL : strchr(s, '-');
	if (dash) {
		char a[64], b[64];
		size_t la = (size_t)(dash - s), lb = strlen(dash + 1);
		if (la == 0 || lb == 0 || la >= sizeof(a) || lb >= sizeof(b))
			return fail(cmd, "--range", s, "expected START-END in hex");
		memcpy(a, s, la);
		a[la] = 0;
		memcpy(b, dash + 1, lb + 1);
		if (gb_parse_hex(a, &out->start) || gb_parse_hex(b, &out->end))
			return fail(cmd, "--range", s, "expected START-END in hex");
		if (out->start > out->end)
			return fail(cmd, "--range", s, "START is greater than END");
		out->kind = GB_RANGE_ADDR;
		out->has_start = out->has_end = true;
		return 0;
	}

	return gb_sym_spec_parse(cmd, "--range", s, out);
}

/* The colon of MODULE:SYMBOL: the last one that is not half of a C++ or
 * Rust "::" (node:node::Start, app::Acc::add with none), or NULL. */
static const char *module_colon(const char *s)
{
	const char *c = NULL;
	for (const char *p = s; *p; p++)
		if (*p == ':') {
			if (p[1] == ':')
				p++;
			else
				c = p;
		}
	return c;
}

/* A name as gdb shows it (demangled: "ns::f", "f(int, char**)"): any
 * printable character. */
static bool demangled_form(const char *sym)
{
	if (!strstr(sym, "::") && !strchr(sym, '('))
		return false;
	for (const char *p = sym; *p; p++)
		if (!isprint((unsigned char)*p))
			return false;
	return true;
}

int gb_sym_spec_parse(const char *cmd, const char *opt, const char *s, struct gb_range_spec *out)
{
	memset(out, 0, sizeof(*out));
	const char *colon = module_colon(s);
	const char *sym = colon ? colon + 1 : s;
	if (colon) {
		size_t lm = (size_t)(colon - s);
		if (lm == 0 || lm >= sizeof(out->module))
			return fail(cmd, opt, s, "expected MODULE:SYMBOL");
		memcpy(out->module, s, lm);
		out->module[lm] = 0;
	}
	if (!*sym || strlen(sym) >= sizeof(out->symbol))
		return fail(cmd, opt, s, "expected a symbol name");
	for (const char *p = sym; *p && !demangled_form(sym); p++)
		if (!is_symbol_char(*p))
			return fail(cmd, opt, s, strcmp(opt, "--range") ?
				    "not a symbol name or an address" :
				    "not a symbol name or a START-END hex range");
	strcpy(out->symbol, sym);
	out->kind = GB_RANGE_SYM;
	return 0;
}

int gb_range_set_bound(const char *cmd, struct gb_range_spec *spec, bool is_end, const char *s)
{
	const char *opt = is_end ? "--end" : "--start";
	uint64_t v;
	if (spec->kind == GB_RANGE_SYM)
		return fail(cmd, opt, s, "--start/--end cannot be combined with a symbol range");
	if (gb_parse_hex(s, &v))
		return fail(cmd, opt, s, "expected a hex address");
	spec->kind = GB_RANGE_ADDR;
	if (is_end) {
		spec->end = v;
		spec->has_end = true;
	} else {
		spec->start = v;
		spec->has_start = true;
	}
	if (spec->has_start && spec->has_end && spec->start > spec->end)
		return fail(cmd, opt, s, "START is greater than END");
	return 0;
}

void gb_range_describe(const struct gb_range_spec *spec, char *buf, size_t len)
{
	switch (spec->kind) {
	case GB_RANGE_SYM:
		if (spec->module[0])
			snprintf(buf, len, "%s:%s", spec->module, spec->symbol);
		else
			snprintf(buf, len, "%s", spec->symbol);
		break;
	case GB_RANGE_ADDR:
		snprintf(buf, len, "0x%llx-0x%llx", (unsigned long long)spec->start,
			 (unsigned long long)(spec->has_end ? spec->end : ~0ull));
		break;
	default:
		snprintf(buf, len, "(all)");
	}
}
