/* Where the unit tests find the test programs: <dir of the unit-test
 * binary>/progs/NAME (the binary lives in the output directory). */
#ifndef GB_TESTS_UNIT_PROGS_H
#define GB_TESTS_UNIT_PROGS_H

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* 0 when the program is built, else -1 (buf holds the path either way). */
static inline int unit_prog_path(const char *name, char *buf, size_t len)
{
	char self[PATH_MAX - 64];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -1;
	self[n] = 0;
	*strrchr(self, '/') = 0;
	snprintf(buf, len, "%s/progs/%s", self, name);
	return access(buf, X_OK) ? -1 : 0;
}

#endif
