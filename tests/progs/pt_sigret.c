/* Probe trap: synchronous faults inside the range whose handlers (outside
 * it) return into it.  `traced` loads from a page that main made
 * PROT_NONE (the SIGSEGV handler makes it readable and returns to the load,
 * which runs again), then runs a ud2 whose SIGILL handler resumes after it
 * (rip + 2), and a second ud2 whose handler moves the resume address to
 * sr_land, further on in the range (skipping an add).  first_load,
 * first_skip and first_jump are the same shapes with the faulting
 * instruction first (an entry of their range).  Usage: pt_sigret
 * [N] (default 10).  Prints a checksum and the handler counts; exit 0.
 * Ranges: traced, first_load, first_skip, first_jump. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

long traced(long *page, long x), first_load(long *page, long x), first_skip(long x),
	first_jump(long x);
extern char sr_skip[], sr_jump[], sr_land[], fs_ud2[], fj_ud2[], fj_land[];

__asm__(".text\n"
	".globl traced\n.type traced,@function\n"
	"traced:\n"
	"	lea 1(%rsi), %rax\n"
	"	mov (%rdi), %rcx\n"        /* SIGSEGV the first time: reloaded */
	"	add %rcx, %rax\n"
	".globl sr_skip\nsr_skip:\n"
	"	ud2\n"                     /* SIGILL: resumed at the add */
	"	add $3, %rax\n"
	".globl sr_jump\nsr_jump:\n"
	"	ud2\n"                     /* SIGILL: resumed at sr_land */
	"	add $100, %rax\n"
	".globl sr_land\nsr_land:\n"
	"	imul $7, %rax, %rax\n"
	"	ret\n"
	".size traced,.-traced\n"
	/* The same faults as a range's first instruction (an entry: run
	 * natively by the probe trap). */
	".globl first_load\n.type first_load,@function\n"
	"first_load:\n"
	"	mov (%rdi), %rax\n"
	"	add %rsi, %rax\n"
	"	ret\n"
	".size first_load,.-first_load\n"
	".globl first_skip\n.type first_skip,@function\n"
	"first_skip:\n"
	".globl fs_ud2\nfs_ud2:\n"
	"	ud2\n"
	"	lea 5(%rdi), %rax\n"
	"	ret\n"
	".size first_skip,.-first_skip\n"
	".globl first_jump\n.type first_jump,@function\n"
	"first_jump:\n"
	".globl fj_ud2\nfj_ud2:\n"
	"	ud2\n"
	"	lea 100(%rdi), %rax\n"
	".globl fj_land\nfj_land:\n"
	"	lea 9(%rdi), %rax\n"
	"	ret\n"
	".size first_jump,.-first_jump\n");

static long *page;
static volatile long segvs, ills;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	segvs++;
	mprotect(page, 4096, PROT_READ | PROT_WRITE);
}

static void on_ill(int sig, siginfo_t *si, void *ucp)
{
	ucontext_t *uc = ucp;
	greg_t *rip = &uc->uc_mcontext.gregs[REG_RIP];
	ills++;
	if (*rip == (greg_t)sr_skip || *rip == (greg_t)fs_ud2)
		*rip += 2;
	else if (*rip == (greg_t)sr_jump)
		*rip = (greg_t)sr_land;
	else if (*rip == (greg_t)fj_ud2)
		*rip = (greg_t)fj_land;
	else
		abort();
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10, sum = 0;
	struct sigaction sa = { .sa_sigaction = on_segv, .sa_flags = SA_SIGINFO };
	sigaction(SIGSEGV, &sa, NULL);
	sa.sa_sigaction = on_ill;
	sigaction(SIGILL, &sa, NULL);
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return 1;
	for (long i = 0; i < n; i++) {
		page[0] = i * 11;
		mprotect(page, 4096, PROT_NONE);
		sum = sum * 3 + traced(page, i);
		mprotect(page, 4096, PROT_NONE);
		sum = sum * 3 + first_load(page, i);
		sum = sum * 3 + first_skip(i) + first_jump(i);
	}
	printf("sum %ld segv %ld ill %ld\n", sum, segvs, ills);
	return 0;
}
