/* A long stretch that ends with a faulting write, many times: sp_run spins
 * N iterations (3 instructions each), then `mov %rax,(%rdi)` writes to a
 * read-only page (SIGSEGV); the handler (outside sp_run) makes the page
 * writable and returns, so the mov runs again and writes.  main makes the
 * page read-only again before each round.
 *
 * Under the patch trap gebpf drains the cache's ring while the stretch
 * runs, so it is usually reading records when the mov's record (written
 * before the mov runs) arrives: the faulting execution must still give an
 * exec line without a write line (docs/trace-format.md "Hardware semantics").
 * Usage: spin_fault [ROUNDS [N]] (default 50 rounds, N 20000).  Prints
 * "addr ro 0x..." once, then "faults F" (F must be ROUNDS).  Exit 0; 1 when
 * a round did not fault once. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

long sp_run(long n, long *ro);
asm(".pushsection .text.spin_fault,\"ax\",@progbits\n"
    "	.balign 4096\n" /* (a page of its own: the page trap's handler is not on it) */
    "	.globl sp_run\n	.type sp_run,@function\n"
    "sp_run:\n"
    "	mov %rdi,%rax\n"
    "	xor %ecx,%ecx\n" /* (the loop starts past the entry's 5 bytes) */
    "1:	add $3,%rax\n"
    "	dec %rdi\n"
    "	jnz 1b\n"
    "	.globl sp_write\n"
    "sp_write:\n"
    "	mov %rax,(%rsi)\n"
    "	ret\n"
    "	.size sp_run,.-sp_run\n"
    "	.balign 4096\n"
    ".popsection\n");

static long *page;
static volatile sig_atomic_t faults;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	if (si->si_addr != (void *)page)
		_exit(1);
	faults++;
	mprotect(page, 4096, PROT_READ | PROT_WRITE);
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 50, n = argc > 2 ? atol(argv[2]) : 20000;
	struct sigaction sa = { .sa_sigaction = on_segv, .sa_flags = SA_SIGINFO };
	page = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED || rounds < 1 || n < 1 || sigaction(SIGSEGV, &sa, NULL))
		return 2;
	printf("addr ro %p\n", (void *)page);
	for (long r = 0; r < rounds; r++) {
		if (mprotect(page, 4096, PROT_READ))
			return 2;
		long was = faults;
		sp_run(n, page);
		if (faults != was + 1 || *page != n + 3 * n)
			return 1;
	}
	printf("faults %ld\n", (long)faults);
	return 0;
}
