/* C++ and Rust names demangled: demangle.h. */
#include "sym/demangle.h"

#include <libiberty/demangle.h>
#include <stdlib.h>
#include <string.h>

const char *gb_demangle(const char *name, char **buf, size_t *cap)
{
	if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
		return name;
	char *d = cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI | DMGL_AUTO);
	if (!d)
		return name;
	size_t n = strlen(d) + 1;
	if (n > *cap) {
		char *b = realloc(*buf, n);
		if (!b) {
			free(d);
			return name; /* (the mangled name still names it) */
		}
		*buf = b;
		*cap = n;
	}
	memcpy(*buf, d, n);
	free(d);
	return *buf;
}
