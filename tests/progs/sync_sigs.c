/* Instructions that raise a synchronous exception delivered as a signal,
 * each caught by a handler (outside the traced functions) that fixes things
 * up: it skips the instruction (saved RIP += its length) or repairs the
 * cause and returns, so that the instruction runs again.
 *   CASE  function  faulting instruction        signal   handler
 *   ill   sf_ill    ud2                         SIGILL   RIP += 2
 *   trap  sf_trap   int3                        SIGTRAP  nothing (RIP is past it)
 *   segv  sf_segv   mov %rax,(%rdi): RO page    SIGSEGV  mprotect RW, re-run
 *   movs  sf_movs   movsq: src readable,        SIGSEGV  mprotect dst RW, re-run
 *                   dst PROT_NONE (read done)
 *   push  sf_push   pushq (%rsi) onto a         SIGSEGV  mprotect RW, re-run
 *                   PROT_NONE stack (read done)          (handler on sigaltstack)
 *   bus   sf_bus    mov (%rdi),%rax past the    SIGBUS   ftruncate the file, re-run
 *                   end of a memfd mapping
 *   fpe   sf_fpe    divq (%rdi), divisor 0      SIGFPE   divisor = 1, re-run
 *                   (the read done)
 *   gp    sf_gp     movaps (%rdi),%xmm0,        SIGSEGV  RDI &= ~15, re-run
 *                   misaligned: #GP, si_addr 0
 *   hlt   sf_hlt    hlt in user mode: #GP       SIGSEGV  RIP += 1
 *   rep   sf_rep    rep movsb of 64 bytes whose SIGSEGV  mprotect RW, re-run
 *                   17th lands on a PROT_NONE            (the REP goes on with
 *                   page (16 done)                       rcx 48)
 * Each sf_X has one instruction before the faulting one; sf_X_at is a
 * function symbol starting AT the faulting instruction and ending with
 * sf_X (a range whose first instruction faults).  All sit in section
 * .text.sync_sigs.
 * Usage: sync_sigs CASE [ROUNDS] (default 2 rounds); CASE "all" runs every
 * case but trap and rep, in the order ill segv movs push bus fpe gp hlt,
 * ROUNDS times each.
 * Prints per round the
 * signal, si_code and whether si_addr was the expected address, the data
 * addresses involved ("addr NAME 0x..."), and the function's result.
 * Exit 0; 2 on bad usage; 1 when something is not as expected. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#define FN(name, before, at, after)                                             \
	"	.globl " name "\n	.type " name ",@function\n" name ":\n"          \
	"	" before "\n"                                                   \
	"	.globl " name "_at\n	.type " name "_at,@function\n" name "_at:\n" \
	"	" at "\n" after "\n"                                            \
	"	.size " name ",.-" name "\n	.size " name "_at,.-" name "_at\n"

asm(".pushsection .text.sync_sigs,\"ax\",@progbits\n"
    "	.balign 4096\n"
    FN("sf_ill", "lea 1(%rdi),%rax", "ud2", "	add $2,%rax\n	ret")
    FN("sf_trap", "lea 1(%rdi),%rax", "int3", "	add $2,%rax\n	ret")
    FN("sf_segv", "lea 1(%rsi),%rax", "mov %rax,(%rdi)", "	add $1,%rax\n	ret")
    FN("sf_movs", "xor %eax,%eax", "movsq", "	ret")
    FN("sf_push", "mov %rsp,%rax\n	mov %rdi,%rsp", "pushq (%rsi)",
       "	mov %rax,%rsp\n	xor %eax,%eax\n	ret")
    FN("sf_bus", "xor %eax,%eax", "mov (%rdi),%rax", "	ret")
    FN("sf_fpe", "mov $100,%eax\n	xor %edx,%edx", "divq (%rdi)", "	ret")
    FN("sf_gp", "xor %eax,%eax", "movaps (%rdi),%xmm0", "	ret")
    FN("sf_hlt", "lea 1(%rdi),%rax", "hlt", "	add $2,%rax\n	ret")
    FN("sf_rep", "mov $64,%ecx", "rep movsb", "	mov %rcx,%rax\n	ret")
    "	.balign 4096\n"
    ".popsection\n");

long sf_ill(long), sf_trap(long), sf_hlt(long);
long sf_segv(long *, long), sf_movs(long *, long *), sf_push(char *, long *);
long sf_rep(char *, const char *);
long sf_bus(long *), sf_fpe(long *), sf_gp(char *);
extern char sf_ill_at[], sf_fpe_at[];

static const char *which;
static volatile sig_atomic_t got_sig, got_code;
static volatile unsigned long got_addr;
static void *fix_page;    /* the page to make RW (segv, movs, push, rep) */
static int memfd = -1;
static long divisor;

static void on_sig(int sig, siginfo_t *si, void *ucp)
{
	ucontext_t *uc = ucp;
	greg_t *g = uc->uc_mcontext.gregs;

	got_sig = sig;
	got_code = si->si_code;
	got_addr = (unsigned long)si->si_addr;
	if (!strcmp(which, "ill"))
		g[REG_RIP] += 2;
	else if (!strcmp(which, "hlt"))
		g[REG_RIP] += 1;
	else if (!strcmp(which, "gp"))
		g[REG_RDI] &= ~15L;
	else if (!strcmp(which, "fpe"))
		divisor = 1;
	else if (!strcmp(which, "bus")) {
		if (ftruncate(memfd, 8192))
			_exit(1);
	} else if (fix_page && mprotect(fix_page, 4096, PROT_READ | PROT_WRITE))
		_exit(1);
}

static int check(const char *what, int sig, unsigned long addr)
{
	int ok = got_sig == sig && got_addr == addr;
	printf("%s: signal %d code %d addr %s\n", what, (int)got_sig, (int)got_code,
	       ok ? "as expected" : "UNEXPECTED");
	got_sig = 0;
	return ok;
}

static void *page(int prot)
{
	void *p = mmap(NULL, 4096, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		exit(1);
	return p;
}

static int run_case(long r)
{
	static long src = 0x1234;
	static char buf[64] __attribute__((aligned(16)));
	int ok = 1;
	long res;

	printf("%s round %ld\n", which, r);
	if (!strcmp(which, "ill")) {
		res = sf_ill(r);
		ok &= check("ill", SIGILL, (unsigned long)sf_ill_at);
	} else if (!strcmp(which, "trap")) {
		res = sf_trap(r);
		ok &= got_sig == SIGTRAP;
		printf("trap: signal %d\n", (int)got_sig);
		got_sig = 0;
	} else if (!strcmp(which, "hlt")) {
		res = sf_hlt(r);
		ok &= check("hlt", SIGSEGV, 0);
	} else if (!strcmp(which, "segv")) {
		long *ro = fix_page = page(PROT_READ);
		printf("addr ro %p\n", (void *)ro);
		res = sf_segv(ro, r);
		ok &= check("segv", SIGSEGV, (unsigned long)ro) && *ro == r + 1;
		munmap(ro, 4096);
	} else if (!strcmp(which, "movs")) {
		long *dst = fix_page = page(PROT_NONE);
		printf("addr src %p\naddr dst %p\n", (void *)&src, (void *)dst);
		res = sf_movs(dst, &src);
		ok &= check("movs", SIGSEGV, (unsigned long)dst) && *dst == src;
		munmap(dst, 4096);
	} else if (!strcmp(which, "rep")) {
		char *two = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (two == MAP_FAILED || mprotect(two + 4096, 4096, PROT_NONE))
			exit(1);
		fix_page = two + 4096;
		for (int i = 0; i < 64; i++)
			buf[i] = (char)(i + r);
		printf("addr src %p\naddr dst %p\n", (void *)buf, (void *)(two + 4096 - 16));
		res = sf_rep(two + 4096 - 16, buf);
		ok &= check("rep", SIGSEGV, (unsigned long)(two + 4096)) &&
		      !memcmp(two + 4096 - 16, buf, 64);
		munmap(two, 8192);
	} else if (!strcmp(which, "push")) {
		char *stk = fix_page = page(PROT_NONE);
		printf("addr src %p\naddr top %p\n", (void *)&src, (void *)(stk + 4096));
		res = sf_push(stk + 4096, &src);
		ok &= check("push", SIGSEGV, (unsigned long)(stk + 4088)) &&
		      *(long *)(stk + 4088) == src;
		munmap(stk, 4096);
	} else if (!strcmp(which, "bus")) {
		memfd = memfd_create("sync_sigs", 0);
		if (memfd < 0 || ftruncate(memfd, 100))
			exit(1);
		char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
		if (m == MAP_FAILED)
			exit(1);
		printf("addr past %p\n", (void *)(m + 4096));
		res = sf_bus((long *)(m + 4096));
		ok &= check("bus", SIGBUS, (unsigned long)(m + 4096));
		munmap(m, 8192);
		close(memfd);
	} else if (!strcmp(which, "fpe")) {
		divisor = 0;
		printf("addr divisor %p\n", (void *)&divisor);
		res = sf_fpe(&divisor);
		ok &= check("fpe", SIGFPE, (unsigned long)sf_fpe_at);
	} else if (!strcmp(which, "gp")) {
		for (int i = 0; i < 16; i++)
			buf[i] = (char)(i + r);
		printf("addr buf %p\n", (void *)buf);
		res = sf_gp(buf + 8);
		ok &= check("gp", SIGSEGV, 0);
	} else {
		exit(2);
	}
	printf("result %ld\n", res);
	return ok;
}

int main(int argc, char **argv)
{
	static char altstack[65536];
	static const char *all[] = { "ill", "segv", "movs", "push", "bus", "fpe", "gp", "hlt" };
	struct sigaction sa;
	stack_t ss = { .ss_sp = altstack, .ss_size = sizeof(altstack) };
	int sigs[] = { SIGILL, SIGTRAP, SIGSEGV, SIGBUS, SIGFPE };
	long rounds = argc > 2 ? atol(argv[2]) : 2;
	int ok = 1;

	if (argc < 2)
		return 2;
	if (sigaltstack(&ss, NULL))
		return 1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sig;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	for (unsigned i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (sigaction(sigs[i], &sa, NULL))
			return 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "all")) {
		for (unsigned i = 0; i < sizeof(all) / sizeof(all[0]); i++)
			for (long r = 0; r < rounds; r++) {
				which = all[i];
				ok &= run_case(r);
			}
	} else {
		which = argv[1];
		for (long r = 0; r < rounds; r++)
			ok &= run_case(r);
	}
	return !ok;
}
