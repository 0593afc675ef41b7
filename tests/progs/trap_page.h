/* Pieces shared by the page-trap test programs (tests/progs/trap_*.c). */
#ifndef GB_TESTS_TRAP_PAGE_H
#define GB_TESTS_TRAP_PAGE_H

#include <setjmp.h>
#include <signal.h>

/* long traced(long *slot, long i): *slot = *slot * 31 + i, returns it &
 * 0xffff; alone on its own page, in section .text.SECT (5 instructions and
 * ret, two accesses). */
#define TRAP_PAGE_TRACED(sect)                                                  \
	asm(".pushsection .text." #sect ",\"ax\",@progbits\n"                  \
	    "	.balign 4096\n"                                                 \
	    "	.globl traced\n"                                                \
	    "	.type traced,@function\n"                                       \
	    "traced:\n"                                                         \
	    "	mov (%rdi), %rax\n"                                             \
	    "	imul $31, %rax, %rax\n"                                         \
	    "	add %rsi, %rax\n"                                               \
	    "	mov %rax, (%rdi)\n"                                             \
	    "	and $0xffff, %rax\n"                                            \
	    "	ret\n"                                                          \
	    "	.size traced, .-traced\n"                                       \
	    "	.balign 4096\n"                                                 \
	    ".popsection\n")

/* A SIGSEGV handler (on_segv, for sigaction with SA_SIGINFO) that counts
 * faults, keeps the last si_addr and si_code, and siglongjmps to jb. */
static sigjmp_buf jb __attribute__((unused));
static volatile sig_atomic_t faults __attribute__((unused));
static volatile unsigned long last_addr __attribute__((unused));
static volatile int last_code __attribute__((unused));

static __attribute__((unused)) void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	faults++;
	last_addr = (unsigned long)si->si_addr;
	last_code = si->si_code;
	siglongjmp(jb, 1);
}

/* Install on_segv for SIGSEGV: 0, or -1 (sigaction failed). */
static __attribute__((unused)) int catch_segv(void)
{
	struct sigaction sa = { .sa_sigaction = on_segv, .sa_flags = SA_SIGINFO };
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGSEGV, &sa, NULL) ? -1 : 0;
}

#endif
