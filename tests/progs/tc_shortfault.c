/* A fault at an entry that keeps a uprobe under the patch trap: `traced`
 * begins with a 2-byte load (`mov (%rdi), %eax`) and `ts_in2`, 2 bytes in,
 * is the target of a jump from `via_in2` (outside), so no 5-byte patch can
 * go at `traced`.  Every third call passes a bad pointer: the load faults,
 * and the SA_SIGINFO SIGSEGV handler (outside) resumes at `ts_mid`, an
 * address of the range that is no entry (rax = 100).  Assembly in C (the
 * exact bytes matter).  Usage: tc_shortfault [N] (default 20).  Prints a
 * checksum; exit 0.  Range: `traced`.
 * With TC_RESUME_BY_LENGTH defined (tc_probedfault.c) the handler resumes
 * by RIP += 4 instead, and ts_mid is a local label: no code address of the
 * range is in the program's data. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

long traced(const int *p, long x), via_in2(long x);
#ifndef TC_RESUME_BY_LENGTH
extern char ts_mid[];
#define TS_MID_GLOBL ".globl ts_mid\n"
#else
#define TS_MID_GLOBL ""
#endif

__asm__(".text\n"
	".globl traced\n.type traced,@function\n"
	"traced:\n"
	"	mov (%rdi), %eax\n"        /* 8b 07 */
	".globl ts_in2\nts_in2:\n"
	"	add %esi, %eax\n"          /* 01 f0 */
	TS_MID_GLOBL "ts_mid:\n"
	"	lea 1(%rax,%rax,2), %rax\n"
	"	xor $0x5a, %rax\n"
	"	ret\n"
	".size traced,.-traced\n"
	".globl via_in2\n.type via_in2,@function\n"
	"via_in2:\n"
	"	mov %rdi, %rsi\n"
	"	mov $7, %eax\n"
	"	jmp ts_in2\n"
	".size via_in2,.-via_in2\n");

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	(void)sig;
	(void)si;
	uc->uc_mcontext.gregs[REG_RAX] = 100;
#ifdef TC_RESUME_BY_LENGTH
	uc->uc_mcontext.gregs[REG_RIP] += 4; /* at ts_mid, past the load and the add */
#else
	uc->uc_mcontext.gregs[REG_RIP] = (greg_t)ts_mid;
#endif
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, NULL);
	static const int good = 5;
	unsigned long sum = 0;
	for (long i = 0; i < n; i++) {
		const int *p = i % 3 == 2 ? (const int *)16 : &good;
		sum = sum * 7 + (unsigned long)(traced(p, i) + via_in2(i) * 3);
	}
	printf("checksum %lx\n", sum);
	return 0;
}
