/* A program that mprotects the page holding `traced` itself, between calls:
 *   phase none:  PROT_NONE, then back to PROT_READ|PROT_EXEC, then a call
 *   phase rw:    PROT_READ|PROT_WRITE, then back to PROT_READ|PROT_EXEC, a call
 *   phase ro:    PROT_READ (not executable) and a call, which faults (its
 *                own SIGSEGV handler recovers with siglongjmp), then back to
 *                PROT_READ|PROT_EXEC and a call
 * each phase ROUNDS times (default 3), with calls of `traced` before and
 * after.  `traced` sits alone on its page (section .text.trap_mprotect).
 * Usage: trap_mprotect [ROUNDS [PHASES]]: PHASES is a subset of "nwr" (the
 * phases none, rw, ro; default all three).  Prints what happened in each
 * phase and a checksum; exit 0.  Range: `traced`. */
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "trap_page.h"

long traced(long *slot, long i);

TRAP_PAGE_TRACED(trap_mprotect);

static void prot(void *page, int p, const char *what)
{
	if (mprotect(page, 4096, p)) {
		perror(what);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 3;
	const char *phases = argc > 2 ? argv[2] : "nwr";
	static long slot[1] = {3};
	unsigned long sum = 0;
	void *page = (void *)((uintptr_t)traced & ~(uintptr_t)4095);
	if (catch_segv())
		return 1;
	sum += (unsigned long)traced(slot, 1);
	for (long r = 0; r < rounds; r++) {
		if (strchr(phases, 'n')) {
			prot(page, PROT_NONE, "PROT_NONE");
			prot(page, PROT_READ | PROT_EXEC, "restore after PROT_NONE");
			sum += (unsigned long)traced(slot, 10 + r);
			printf("round %ld none: slot %ld\n", r, slot[0]);
		}
		if (strchr(phases, 'w')) {
			prot(page, PROT_READ | PROT_WRITE, "PROT_READ|PROT_WRITE");
			prot(page, PROT_READ | PROT_EXEC, "restore after RW");
			sum += (unsigned long)traced(slot, 20 + r);
			printf("round %ld rw: slot %ld\n", r, slot[0]);
		}
		if (strchr(phases, 'r')) {
			prot(page, PROT_READ, "PROT_READ");
			if (!sigsetjmp(jb, 1)) {
				sum += (unsigned long)traced(slot, 30 + r);
				printf("round %ld ro: call did not fault\n", r);
			} else {
				printf("round %ld ro: fault code %d at traced%+ld\n", r, last_code,
				       (long)(last_addr - (unsigned long)traced));
			}
			prot(page, PROT_READ | PROT_EXEC, "restore after PROT_READ");
		}
		sum += (unsigned long)traced(slot, 40 + r);
		printf("round %ld after: slot %ld\n", r, slot[0]);
	}
	printf("faults %d sum %lu slot %ld\n", (int)faults, sum, slot[0]);
	return 0;
}
