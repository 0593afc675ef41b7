/* Parsing the plugin's arguments (knobs.h). */
#include "qemu/knobs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Hex with an optional 0x, the whole string, within 64 bits. */
static int parse_hex(const char *s, uint64_t *v)
{
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	if (!*s || strspn(s, "0123456789abcdefABCDEF") != strlen(s) || strlen(s) > 16)
		return -1;
	*v = strtoull(s, NULL, 16);
	return 0;
}

static int parse_dec(const char *s, uint64_t *v)
{
	char *end;
	if (!*s || strspn(s, "0123456789") != strlen(s))
		return -1;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno ? -1 : 0;
}

static int bad(char *err, size_t len, const char *arg, const char *why)
{
	snprintf(err, len, "%s: %s", arg, why);
	return -1;
}

static int parse_range(struct gb_qknobs *k, const char *arg, const char *v, char *err, size_t len)
{
	const char *dash = strchr(v, '-');
	if (dash) {
		char lo[32];
		size_t n = (size_t)(dash - v);
		if (n >= sizeof(lo))
			return bad(err, len, arg, "expected START-END (hex, inclusive) or SYMBOL");
		memcpy(lo, v, n);
		lo[n] = 0;
		if (parse_hex(lo, &k->start) || parse_hex(dash + 1, &k->end))
			return bad(err, len, arg, "expected START-END (hex, inclusive) or SYMBOL");
		if (k->start > k->end)
			return bad(err, len, arg, "START is above END");
		k->has_start = k->has_end = true;
		return 0;
	}
	if (!*v)
		return bad(err, len, arg, "expected START-END (hex, inclusive) or SYMBOL");
	const char *colon = strchr(v, ':');
	if (colon) {
		if (colon == v || !colon[1])
			return bad(err, len, arg, "expected MODULE:SYMBOL");
		static char module[256];
		size_t n = (size_t)(colon - v);
		if (n >= sizeof(module))
			return bad(err, len, arg, "module name too long");
		memcpy(module, v, n);
		module[n] = 0;
		k->module = module;
		k->symbol = colon + 1;
	} else {
		k->symbol = v;
	}
	return 0;
}

int gb_qknobs_parse(struct gb_qknobs *k, int argc, char **argv, char *err, size_t len)
{
	bool range = false, bound = false;
	memset(k, 0, sizeof(*k));
	k->exec = true;
	k->max_events = GB_QEMU_DEFAULT_MAX_EVENTS;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i], *eq = strchr(a, '=');
		if (!eq)
			return bad(err, len, a, "expected NAME=VALUE (docs/qemu.md)");
		size_t n = (size_t)(eq - a);
		const char *v = eq + 1;
#define IS(name) (n == strlen(name) && !strncmp(a, name, n))
		if (IS("range")) {
			if (range || bound)
				return bad(err, len, a, "give range= once, and not with start=/end=");
			range = true;
			if (parse_range(k, a, v, err, len))
				return -1;
		} else if (IS("start") || IS("end")) {
			bool is_end = IS("end");
			uint64_t x;
			if (range)
				return bad(err, len, a, "give range= or start=/end=, not both");
			if (parse_hex(v, &x))
				return bad(err, len, a, "expected a hex address");
			bound = true;
			if (is_end) {
				k->has_end = true;
				k->end = x;
			} else {
				k->has_start = true;
				k->start = x;
			}
			if (k->has_start && k->has_end && k->start > k->end)
				return bad(err, len, a, "start is above end");
		} else if (IS("exec")) {
			if (!strcmp(v, "on"))
				k->exec = true;
			else if (!strcmp(v, "off"))
				k->exec = false;
			else
				return bad(err, len, a, "expected on or off");
		} else if (IS("max_events")) {
			if (parse_dec(v, &k->max_events))
				return bad(err, len, a, "expected a number of lines (0 = unlimited)");
		} else if (IS("values")) {
			if (!strcmp(v, "off"))
				k->values = false;
			else if (strcmp(v, "on"))
				return bad(err, len, a, "expected on or off");
#ifdef GB_QEMU_VALUES
			else
				k->values = true;
#else
			else
				return bad(err, len, a, GB_QEMU_VALUES_TOO_OLD);
#endif
		} else if (IS("out")) {
			if (!*v)
				return bad(err, len, a, "expected a file name");
			k->out = v;
		} else {
			return bad(err, len, a, "unknown argument (range, start, end, exec, max_events, out"
#ifdef GB_QEMU_VALUES
				   ", values"
#endif
				   ")");
		}
#undef IS
	}
	return 0;
}

bool gb_qknobs_zstd(const char *path)
{
	size_t n = path ? strlen(path) : 0;
	return n > 4 && !strcmp(path + n - 4, ".zst");
}
