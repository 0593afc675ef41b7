/* Which operand does CMPS fetch first?  Both pages PROT_NONE; the SIGSEGV's
 * si_addr names the page fetched first.  Prints "cmpsb rsi" (or "cmpsq ...",
 * with argument q).  Hardware: rsi; QEMU and valgrind: rdi (docs/testing.md,
 * "Emulator deviations"). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char *src, *dst;
static const char *name = "cmpsb";

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	char *a = si->si_addr;
	printf("%s %s\n", name, a >= src && a < src + 4096 ? "rsi" : a >= dst && a < dst + 4096 ? "rdi" : "?");
	fflush(stdout);
	_exit(0);
}

int main(int argc, char **argv)
{
	char *m = mmap(NULL, 3 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct sigaction sa = { .sa_sigaction = on_segv, .sa_flags = SA_SIGINFO };
	src = m;
	dst = m + 2 * 4096;
	sigaction(SIGSEGV, &sa, NULL);
	if (argc > 1 && !strcmp(argv[1], "q")) {
		name = "cmpsq";
		asm volatile("cmpsq" : "+S"(src), "+D"(dst) : : "memory", "cc");
	} else {
		asm volatile("cmpsb" : "+S"(src), "+D"(dst) : : "memory", "cc");
	}
	return 1;
}
