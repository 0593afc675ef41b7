#include "common/log.h"

#include <stdio.h>

static bool verbose;

void gb_log_set_verbose(bool on) { verbose = on; }

static void vlog(const char *prefix, const char *fmt, va_list ap)
{
	/* One fprintf per line so concurrent writers never interleave mid-line. */
	char buf[1024];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	fprintf(stderr, "gebpf: %s%s\n", prefix, buf);
}

void gb_err(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog("", fmt, ap);
	va_end(ap);
}

int gb_fail(int e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog("", fmt, ap);
	va_end(ap);
	return e;
}

void gb_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog("warning: ", fmt, ap);
	va_end(ap);
}

void gb_info(const char *fmt, ...)
{
	va_list ap;
	if (!verbose)
		return;
	va_start(ap, fmt);
	vlog("", fmt, ap);
	va_end(ap);
}

int gb_libbpf_print(int level, const char *fmt, va_list ap)
{
	if (!verbose)
		return 0;
	return vfprintf(stderr, fmt, ap);
}
