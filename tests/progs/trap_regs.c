/* Does entering and leaving the range disturb the thread?  `probe` (out of
 * the range) fills the 128-byte red zone below rsp, sets known flags
 * (CF, PF, AF, ZF), puts a distinct constant in every general register but
 * rsp and in xmm0/xmm15, then JUMPS into `traced_block` (the range, alone on
 * its page), which only moves rdi back and forth with lea and jumps back.
 * On return `probe` stores every register, the red zone and the flags
 * (rip-relative stores, which change nothing) for main to check.  Around
 * each probe, main also checks errno and that a blocked, pending SIGUSR1
 * stays pending (and is delivered once unblocked).
 * Entering the range stops the thread at `traced_block`; leaving it stops
 * it (or sends it through gebpf's trampoline) at `probe_back`, with the
 * red zone live and every register in use.
 * With IDLE 1, a second thread exists throughout, blocked in read() (with
 * other threads live, a tracer may leave the range differently).
 * Usage: trap_regs [ROUNDS [IDLE]] (default 5, 0).  Prints "ok" per round or
 * each difference; exit 0.  Range: `traced_block`. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void probe(void);

/* probe_regs: rax rbx rcx rdx rsi rdi rbp r8..r15 (15), rsp before, rsp
 * after, xmm0 low, xmm15 low, rflags */
uint64_t probe_regs[20];
uint64_t probe_red[16];

asm(".pushsection .text.trap_regs,\"ax\",@progbits\n"
    "	.balign 4096\n"
    "	.globl traced_block\n"
    "	.type traced_block,@function\n"
    "traced_block:\n"
    "	lea 8(%rdi), %rdi\n"
    "	nop\n"
    "	lea -8(%rdi), %rdi\n"
    "	jmp probe_back\n"
    "	.size traced_block, .-traced_block\n"
    "	.balign 4096\n"
    ".popsection\n"
    "	.text\n"
    "	.globl probe\n"
    "	.type probe,@function\n"
    "probe:\n"
    "	push %rbx\n"
    "	push %rbp\n"
    "	push %r12\n"
    "	push %r13\n"
    "	push %r14\n"
    "	push %r15\n"
    "	mov $-128, %rax\n"                  /* red zone: -128..-8(%rsp) = 0x5a00+k */
    "1:	lea 0x5a80(%rax), %rcx\n"
    "	mov %rcx, (%rsp,%rax)\n"
    "	add $8, %rax\n"
    "	jnz 1b\n"
    "	mov %rsp, probe_regs+120(%rip)\n"
    "	movabs $0x1111111111111111, %rax\n"
    "	movq %rax, %xmm0\n"
    "	movabs $0xf0f0f0f0f0f0f0f0, %rax\n"
    "	movq %rax, %xmm15\n"
    "	mov $-1, %eax\n"
    "	add $1, %eax\n"                      /* CF ZF PF AF set, SF OF clear */
    "	movabs $0x1010101010101010, %rax\n"
    "	movabs $0x2020202020202020, %rbx\n"
    "	movabs $0x3030303030303030, %rcx\n"
    "	movabs $0x4040404040404040, %rdx\n"
    "	movabs $0x5050505050505050, %rsi\n"
    "	movabs $0x6060606060606060, %rdi\n"
    "	movabs $0x7070707070707070, %rbp\n"
    "	movabs $0x8080808080808080, %r8\n"
    "	movabs $0x9090909090909090, %r9\n"
    "	movabs $0xa0a0a0a0a0a0a0a0, %r10\n"
    "	movabs $0xb0b0b0b0b0b0b0b0, %r11\n"
    "	movabs $0xc0c0c0c0c0c0c0c0, %r12\n"
    "	movabs $0xd0d0d0d0d0d0d0d0, %r13\n"
    "	movabs $0xe0e0e0e0e0e0e0e0, %r14\n"
    "	movabs $0xf0f0f0f0f0f0f0f0, %r15\n"
    "	jmp traced_block\n"
    "	.globl probe_back\n"
    "probe_back:\n"
    "	mov %rax, probe_regs+0(%rip)\n"
    "	mov %rbx, probe_regs+8(%rip)\n"
    "	mov %rcx, probe_regs+16(%rip)\n"
    "	mov %rdx, probe_regs+24(%rip)\n"
    "	mov %rsi, probe_regs+32(%rip)\n"
    "	mov %rdi, probe_regs+40(%rip)\n"
    "	mov %rbp, probe_regs+48(%rip)\n"
    "	mov %r8, probe_regs+56(%rip)\n"
    "	mov %r9, probe_regs+64(%rip)\n"
    "	mov %r10, probe_regs+72(%rip)\n"
    "	mov %r11, probe_regs+80(%rip)\n"
    "	mov %r12, probe_regs+88(%rip)\n"
    "	mov %r13, probe_regs+96(%rip)\n"
    "	mov %r14, probe_regs+104(%rip)\n"
    "	mov %r15, probe_regs+112(%rip)\n"
    "	mov %rsp, probe_regs+128(%rip)\n"
    "	movq %xmm0, probe_regs+136(%rip)\n"
    "	movq %xmm15, probe_regs+144(%rip)\n"
    "	lea probe_red(%rip), %rdi\n"         /* lea/mov keep the flags */
    "	mov -128(%rsp), %rax\n"
    "	mov %rax, 0(%rdi)\n"
    "	mov -120(%rsp), %rax\n"
    "	mov %rax, 8(%rdi)\n"
    "	mov -112(%rsp), %rax\n"
    "	mov %rax, 16(%rdi)\n"
    "	mov -104(%rsp), %rax\n"
    "	mov %rax, 24(%rdi)\n"
    "	mov -96(%rsp), %rax\n"
    "	mov %rax, 32(%rdi)\n"
    "	mov -88(%rsp), %rax\n"
    "	mov %rax, 40(%rdi)\n"
    "	mov -80(%rsp), %rax\n"
    "	mov %rax, 48(%rdi)\n"
    "	mov -72(%rsp), %rax\n"
    "	mov %rax, 56(%rdi)\n"
    "	mov -64(%rsp), %rax\n"
    "	mov %rax, 64(%rdi)\n"
    "	mov -56(%rsp), %rax\n"
    "	mov %rax, 72(%rdi)\n"
    "	mov -48(%rsp), %rax\n"
    "	mov %rax, 80(%rdi)\n"
    "	mov -40(%rsp), %rax\n"
    "	mov %rax, 88(%rdi)\n"
    "	mov -32(%rsp), %rax\n"
    "	mov %rax, 96(%rdi)\n"
    "	mov -24(%rsp), %rax\n"
    "	mov %rax, 104(%rdi)\n"
    "	mov -16(%rsp), %rax\n"
    "	mov %rax, 112(%rdi)\n"
    "	mov -8(%rsp), %rax\n"
    "	mov %rax, 120(%rdi)\n"
    "	pushf\n"                             /* the red zone is saved: now the stack */
    "	pop %rax\n"
    "	mov %rax, probe_regs+152(%rip)\n"
    "	pop %r15\n"
    "	pop %r14\n"
    "	pop %r13\n"
    "	pop %r12\n"
    "	pop %rbp\n"
    "	pop %rbx\n"
    "	ret\n"
    "	.size probe, .-probe\n");

static const char *const names[20] = {
	"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8", "r9", "r10", "r11", "r12",
	"r13", "r14", "r15", "rsp-before", "rsp", "xmm0", "xmm15", "rflags",
};

static int idle_pipe[2];

static void *idle(void *arg)
{
	char c;
	(void)arg;
	if (read(idle_pipe[0], &c, 1) < 0)
		return NULL;
	return NULL;
}

static volatile sig_atomic_t usr1;
static void on_usr1(int sig) { (void)sig; usr1++; }

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 5;
	int bad_total = 0;
	sigset_t set, pend;
	pthread_t idler;
	int with_idle = argc > 2 && atoi(argv[2]);

	if (with_idle && (pipe(idle_pipe) || pthread_create(&idler, NULL, idle, NULL)))
		return 1;

	signal(SIGUSR1, on_usr1);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	for (long r = 0; r < rounds; r++) {
		int bad = 0;
		if (r & 1) { /* odd rounds: a blocked SIGUSR1 pending throughout */
			sigprocmask(SIG_BLOCK, &set, NULL);
			raise(SIGUSR1);
		}
		errno = 1000 + (int)r;
		probe();
		int e = errno;
		uint64_t want[20] = {
			0x1010101010101010ull, 0x2020202020202020ull, 0x3030303030303030ull,
			0x4040404040404040ull, 0x5050505050505050ull, 0x6060606060606060ull,
			0x7070707070707070ull, 0x8080808080808080ull, 0x9090909090909090ull,
			0xa0a0a0a0a0a0a0a0ull, 0xb0b0b0b0b0b0b0b0ull, 0xc0c0c0c0c0c0c0c0ull,
			0xd0d0d0d0d0d0d0d0ull, 0xe0e0e0e0e0e0e0e0ull, 0xf0f0f0f0f0f0f0f0ull,
			probe_regs[15], probe_regs[15], 0x1111111111111111ull,
			0xf0f0f0f0f0f0f0f0ull, 0,
		};
		for (int k = 0; k < 19; k++)
			if (probe_regs[k] != want[k]) {
				printf("round %ld: %s = %#llx, want %#llx\n", r, names[k],
				       (unsigned long long)probe_regs[k], (unsigned long long)want[k]);
				bad++;
			}
		/* CF PF AF ZF set; SF DF OF clear; TF clear; bit 1 always set;
		 * IF set in user mode. */
		uint64_t fl = probe_regs[19] & 0xcd5, want_fl = 0x055;
		if (fl != want_fl || !(probe_regs[19] & 0x200) || (probe_regs[19] & 0x100)) {
			printf("round %ld: rflags = %#llx\n", r, (unsigned long long)probe_regs[19]);
			bad++;
		}
		for (int k = 0; k < 16; k++)
			if (probe_red[k] != (uint64_t)(0x5a80 - 128 + 8 * k)) {
				printf("round %ld: red zone -%d(%%rsp) = %#llx, want %#x\n", r, 128 - 8 * k,
				       (unsigned long long)probe_red[k], 0x5a80 - 128 + 8 * k);
				bad++;
			}
		if (e != 1000 + (int)r) {
			printf("round %ld: errno %d, want %d\n", r, e, 1000 + (int)r);
			bad++;
		}
		if (r & 1) {
			sigpending(&pend);
			if (!sigismember(&pend, SIGUSR1)) {
				printf("round %ld: the blocked SIGUSR1 is no longer pending\n", r);
				bad++;
			}
			int before = usr1;
			sigprocmask(SIG_UNBLOCK, &set, NULL);
			if (usr1 != before + 1) {
				printf("round %ld: SIGUSR1 delivered %d times on unblock\n", r, usr1 - before);
				bad++;
			}
		}
		if (!bad)
			printf("round %ld: ok\n", r);
		bad_total += bad;
	}
	if (with_idle) {
		if (write(idle_pipe[1], "x", 1) != 1)
			return 1;
		pthread_join(idler, NULL);
	}
	printf("rounds %ld differences %d usr1 %d\n", rounds, bad_total, (int)usr1);
	return 0;
}
