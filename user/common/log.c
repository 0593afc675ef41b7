#include "common/log.h"

#include <stdio.h>

#include <bpf/libbpf.h>

static bool verbose, demoted, debug;

void gb_log_set_verbose(bool on) { verbose = on; }
void gb_log_set_debug(bool on)
{
	debug = on;
	if (on)
		verbose = true;
}
void gb_log_demote_warnings(bool on) { demoted = on; }

/* src with its control characters (a newline in a --range value, a file
 * name, a symbol) escaped C-style, so that a message stays one line. */
static void escape(char *dst, size_t len, const char *src)
{
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)src; *p && o + 5 < len; p++) {
		const char *named = *p == '\n' ? "\\n" : *p == '\t' ? "\\t" : *p == '\r' ? "\\r" : NULL;
		if (named)
			o += (size_t)snprintf(dst + o, len - o, "%s", named);
		else if (*p < 0x20 || *p == 0x7f)
			o += (size_t)snprintf(dst + o, len - o, "\\x%02x", *p);
		else
			dst[o++] = (char)*p;
	}
	dst[o] = 0;
}

static void vlog(const char *prefix, const char *fmt, va_list ap)
{
	/* One fprintf per line so concurrent writers never interleave mid-line. */
	char buf[1024], line[1024];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	escape(line, sizeof(line), buf);
	fprintf(stderr, "gebpf: %s%s\n", prefix, line);
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
	if (demoted && !verbose)
		return;
	va_start(ap, fmt);
	vlog(demoted ? "" : "warning: ", fmt, ap);
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
	/* libbpf's debug lines (about 200 for each object it loads: ELF
	 * sections, maps, relocations) only under --debug; its warnings, which
	 * say why a load or an attach failed, under -v too. */
	if (!debug && (!verbose || level != LIBBPF_WARN))
		return 0;
	return vfprintf(stderr, fmt, ap);
}
