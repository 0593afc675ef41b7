/* glibc's string functions, called N times each (default 1000) on strings
 * of 1-300 bytes; prints a sum of their results.  Built -fno-builtin and
 * dynamic: the calls go to the IFUNC variants glibc picks for this CPU, as
 * a program's do (tests/e2e/test_trap_patch_short.py,
 * bench/bench_strfns.py).  Usage: libc_strings [N].  Exit 0. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>
static char a[4096], b[4096];
int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	unsigned long s = 0;
	for (int i = 0; i < n; i++) {
		size_t len = (i * 37) % 300 + 1;
		memset(a, 'a' + i % 26, len);
		a[len] = 0;
		memcpy(b, a, len + 1);
		memmove(b + 1, b, len);
		s += strlen(a) + strcmp(a, b) + (mempcpy(b, a, len) - (void *)b);
		s += strnlen(b, 100) + (strchr(a, 'z') != NULL) + memcmp(a, b, len / 2) + strncmp(a, b, 5);
		s += (size_t)(strcpy(b, a) - b) + (memchr(a, 'q', len) != NULL) + (size_t)(stpcpy(b, a) - b);
		s += strrchr(a, 'a') != NULL;
	}
	printf("%lu\n", s);
	return 0;
}
