/* Calls libc's strlen, an IFUNC (tests/e2e/test_names.py): N times
 * (argv[1], default 5), or with argv[1] = "wait" once a second until
 * killed after printing "ready".  Dynamic PIE, so strlen is the shared
 * libc's; also calls lib/libnodbg.so (no symbol table, no debug file). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int lib_entry(int);

static const char *volatile text = "the quick brown fox jumps over the lazy dog";

int main(int argc, char **argv)
{
	int wait = argc > 1 && !strcmp(argv[1], "wait");
	int n = argc > 1 && !wait ? atoi(argv[1]) : 5;
	size_t t = 0;

	if (wait) {
		printf("ready\n");
		fflush(stdout);
	}
	for (int i = 0; wait || i < n; i++) {
		t += strlen(text + i % 8);
		if (wait)
			sleep(1);
	}
	printf("%zu %d\n", t, lib_entry(2));
	return 0;
}
