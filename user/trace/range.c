#include "trace/range.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "sym/syms.h"

int gb_range_resolve(const struct gb_range_spec *spec, pid_t pid, struct gb_range_spec *out,
		     bool report)
{
	*out = *spec;
	if (spec->kind != GB_RANGE_SYM)
		return 0;
	uint64_t s, e;
	char err[512], text[600];
	int r = gb_sym_resolve(pid, spec->module, spec->symbol, &s, &e, err, sizeof(err));
	if (r) {
		if (report) {
			gb_range_describe(spec, text, sizeof(text));
			gb_err("range %s: %s", text, err);
		}
		return r;
	}
	out->kind = GB_RANGE_ADDR;
	out->has_start = out->has_end = true;
	out->start = s;
	out->end = e;
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
