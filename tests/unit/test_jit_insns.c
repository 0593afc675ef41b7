/* What only the stop-free mode translates (user/jit/rep.c, support.c):
 * REP string instructions, bit tests with a register bit offset into
 * memory, enter, popf, instructions that only raise a signal.  A child
 * runs each function natively under PTRACE_SINGLESTEP (the reference: the
 * step engine's records, gb_insn_accesses at every stop), then translated
 * in a cache shared with this process; the ring must hold the same
 * records (pc, and each access's address, size and direction) in the same
 * order, and the child the same result. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "decode/decode.h"
#include "jit/jit.h"
#include "jit_util.h"
#include "trace/cpu.h"

#define REPS(insn) \
	"	lea ti_a(%rip), %rsi\n	lea ti_b(%rip), %rdi\n	mov $3, %ecx\n	" insn "\n" \
	"	lea ti_a(%rip), %rsi\n	lea ti_b(%rip), %rdi\n	xor %ecx, %ecx\n	" insn "\n"
#define REPS_BACK(insn) \
	"	lea ti_a+56(%rip), %rsi\n	lea ti_b+56(%rip), %rdi\n	mov $3, %ecx\n	" insn "\n"

/* Every REP string instruction, all sizes, counts 3 and 0, DF 0 and 1;
 * repne scas finding its byte, repe cmps stopping on a mismatch. */
extern uint8_t ti_rep[], ti_rep_end[];
__asm__(
	".text\n"
	".globl ti_rep, ti_rep_end\n"
	"ti_rep:\n"
	"	cld\n"
	"	mov $0x5a, %eax\n"
	REPS("rep movsb") REPS("rep movsw") REPS("rep movsl") REPS("rep movsq")
	REPS("rep stosb") REPS("rep stosw") REPS("rep stosl") REPS("rep stosq")
	REPS("rep lodsb") REPS("rep lodsw") REPS("rep lodsl") REPS("rep lodsq")
	"	mov $0x5a, %eax\n"
	REPS("repne scasb") REPS("repe scasw") REPS("repne scasl") REPS("repe scasq")
	REPS("repe cmpsb") REPS("repne cmpsw") REPS("repe cmpsl") REPS("repne cmpsq")
	"	std\n"
	REPS_BACK("rep movsb") REPS_BACK("rep movsq") REPS_BACK("rep stosl") REPS_BACK("rep lodsw")
	REPS_BACK("repne scasb") REPS_BACK("repe cmpsq")
	"	cld\n"
	"	lea ti_a(%rip), %rsi\n"
	"	lea ti_b(%rip), %rdi\n"
	"	mov $40, %ecx\n"
	"	mov $0x77, %eax\n"
	"	repne scasb\n"                 /* finds ti_b[3] */
	"	mov %rcx, %rax\n"
	"	add %rdi, %rax\n"
	"	ret\n"
	"ti_rep_end:\n"
	".data\n"
	".align 64\n"
	"ti_a: .fill 64, 1, 0x5a\n"
	"ti_b: .byte 0x5a, 0x5a, 0, 0x77\n"
	"	.fill 60, 1, 0\n"
	".text\n");

/* bt, bts, btr, btc [mem], reg: 16, 32 and 64-bit offsets, positive and
 * negative (the unit holding the bit is below the operand), lock'ed. */
extern uint8_t ti_bt[], ti_bt_end[];
__asm__(
	".text\n"
	".globl ti_bt, ti_bt_end\n"
	"ti_bt:\n"
	"	lea ti_bits+64(%rip), %rsi\n"
	"	mov $-70, %rax\n"
	"	bt %rax, (%rsi)\n"
	"	mov $100, %ecx\n"
	"	bts %ecx, (%rsi)\n"
	"	mov $-3, %dx\n"
	"	btr %dx, 2(%rsi)\n"
	"	mov $129, %r8\n"
	"	btc %r8, 8(%rsi)\n"
	"	mov $-200, %rax\n"
	"	lock bts %rax, (%rsi)\n"
	"	mov $31, %ecx\n"
	"	bt %ecx, ti_bits(%rip)\n"
	"	mov $7, %esi\n"
	"	lea ti_bits(%rip), %rdx\n"
	"	bt %rsi, (%rdx,%rsi,8)\n"      /* the offset register is the index too */
	"	setc %al\n"
	"	movzbl %al, %eax\n"
	"	add ti_bits+64(%rip), %rax\n"
	"	ret\n"
	"ti_bt_end:\n"
	".data\n"
	".align 64\n"
	"ti_bits: .fill 128, 1, 0xa5\n"
	".text\n");

/* enter with nesting levels 0 to 3, popf (flags into adc/setc, DF into a
 * movs), each undone. */
extern uint8_t ti_misc[], ti_misc_end[];
__asm__(
	".text\n"
	".globl ti_misc, ti_misc_end\n"
	"ti_misc:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	enter $16, $0\n"
	"	leave\n"
	"	enter $16, $1\n"
	"	leave\n"
	"	enter $8, $2\n"
	"	leave\n"
	"	enter $0, $3\n"
	"	leave\n"
	"	pushq $0xc7\n"                 /* CF PF ZF SF */
	"	popfq\n"
	"	mov $0, %eax\n"
	"	adc $0, %eax\n"
	"	pushq $0x402\n"                /* DF */
	"	popfq\n"
	"	lea ti_a+8(%rip), %rsi\n"
	"	lea ti_b+8(%rip), %rdi\n"
	"	movsq\n"
	"	movsq\n"
	"	pushq $0x2\n"
	"	popf\n"
	"	add %rsi, %rax\n"
	"	pop %rbp\n"
	"	ret\n"
	"ti_misc_end:\n");

/* AVX2 gathers (dword and qword indices, xmm and ymm, negative indices,
 * partial masks) and sign-masked moves (vmaskmovps/vpmaskmovq loads and
 * stores, maskmovdqu): one access per active element. */
extern uint8_t ti_vec[], ti_vec_end[];
__asm__(
	".text\n"
	".globl ti_vec, ti_vec_end\n"
	"ti_vec:\n"
	"	lea ti_vbuf+128(%rip), %rsi\n"
	"	vmovdqu ti_idx(%rip), %ymm1\n"
	"	vmovdqu ti_mask(%rip), %ymm2\n"
	"	vpgatherdd %ymm2, (%rsi,%ymm1,4), %ymm0\n"
	"	vmovdqu ti_mask(%rip), %xmm2\n"
	"	vgatherdps %xmm2, 16(%rsi,%xmm1,4), %xmm0\n"
	"	vmovdqu ti_qidx(%rip), %ymm3\n"
	"	vmovdqu ti_mask(%rip), %ymm2\n"
	"	vgatherqpd %ymm2, -8(%rsi,%ymm3,8), %ymm4\n"
	"	vmovdqu ti_mask(%rip), %ymm2\n"
	"	vpgatherqd %xmm2, (%rsi,%ymm3,2), %xmm5\n"
	"	vmovdqu ti_mask(%rip), %ymm2\n"
	"	vmaskmovps (%rsi), %ymm2, %ymm6\n"
	"	vmaskmovps %xmm6, %xmm2, 32(%rsi)\n"
	"	vpmaskmovq (%rsi), %ymm2, %ymm7\n"
	"	lea ti_vbuf+64(%rip), %rdi\n"
	"	maskmovdqu %xmm2, %xmm6\n"
	"	vmovd %xmm0, %eax\n"
	"	vzeroupper\n"
	"	ret\n"
	"ti_vec_end:\n"
	".data\n"
	".align 64\n"
	"ti_idx:  .long 3, -2, 7, 0, -30, 5, 1, 12\n"
	"ti_qidx: .quad 4, -9, 2, 6\n"
	"ti_mask: .long -1, 0, -1, -1, 0, 0x80000000, 0x7fffffff, -1\n"
	"ti_vbuf: .fill 256, 1, 0x33\n"
	".text\n");

/* AVX-512 opmask-masked accesses (glibc's string functions on an AVX-512
 * CPU: memset's tail store, strcmp's and memcmp's masked compares and
 * loads): byte stores and loads under {k} (zero-masking too), a compare
 * of a masked memory operand into k, dword and qword moves, compress and
 * expand, partial and empty masks: one access per active element (a
 * compress: its contiguous ones), as stepping gives from the opmask. */
extern uint8_t ti_k[], ti_k_end[];
__asm__(
	".text\n"
	".globl ti_k, ti_k_end\n"
	"ti_k:\n"                        /* (the buffer as it was: both runs alike) */
	"	vpternlogd $0xff, %zmm20, %zmm20, %zmm20\n"
	"	vmovdqu64 %zmm20, ti_kbuf(%rip)\n"
	"	vmovdqu64 %zmm20, ti_kbuf+64(%rip)\n"
	"	vmovdqu64 %zmm20, ti_kbuf+128(%rip)\n"
	"	vmovdqu64 %zmm20, ti_kbuf+192(%rip)\n"
	"	vmovdqu64 %zmm20, ti_kbuf+256(%rip)\n"
	"	lea ti_kbuf+64(%rip), %rsi\n"
	"	mov $0x0f0f00ff00f0f0a5, %rax\n"
	"	kmovq %rax, %k1\n"
	"	vpbroadcastb %esi, %zmm16\n"
	"	vmovdqu8 %zmm16, (%rsi){%k1}\n"
	"	vmovdqu8 3(%rsi), %ymm17{%k1}{z}\n"
	"	mov $0x8001, %eax\n"
	"	kmovq %rax, %k2\n"
	"	vpcmpeqb (%rsi), %ymm17, %k3{%k2}\n"
	"	vmovdqu32 %zmm16, 64(%rsi){%k2}\n"
	"	vmovdqu64 -64(%rsi), %zmm18{%k1}\n"
	"	mov $0xb6, %eax\n"
	"	kmovw %eax, %k4\n"
	"	vpcompressd %zmm16, 8(%rsi){%k4}\n"
	"	vpexpandq 16(%rsi), %zmm19{%k4}{z}\n"
	"	kxorq %k5, %k5, %k5\n"
	"	vmovdqu8 %zmm16, 128(%rsi){%k5}\n"
	"	kmovq %k3, %rax\n"
	"	vzeroupper\n"
	"	ret\n"
	"ti_k_end:\n"
	".data\n"
	".align 64\n"
	"ti_kbuf: .fill 320, 1, 0x44\n"
	".text\n");

static struct gb_jit_mem mem;
static struct gb_jit *jit;

static void teardown(void)
{
	gb_jit__free(jit);
	munmap(mem.code, GB_JIT_SIZE);
}

TestSuite(jit_insns, .fini = teardown);

struct ref_rec { uint64_t pc; int nacc; struct gb_access acc[64]; };

static __attribute__((noinline)) long run(long (*f)(long)) { return f(0); }

/* The child: natively (single-stepped by the parent), stop, translated;
 * exit 0 when both gave the same. */
static __attribute__((noreturn)) void child(uint64_t fn, uint64_t e)
{
	ptrace(PTRACE_TRACEME, 0, NULL, NULL);
	raise(SIGSTOP);
	long want = run((long (*)(long))(uintptr_t)fn);
	raise(SIGSTOP);
	long got = run((long (*)(long))(uintptr_t)e);
	_exit(got == want ? 0 : 3);
}

static void same_as_stepping(const uint8_t *lo, const uint8_t *end)
{
	mem = jit_map_near_as((uint64_t)lo, true);
	jit = jit_open_nostop(&mem, lo, end, 200);
	uint64_t e = gb_jit__entry(jit, (uint64_t)lo, jit_fetch, NULL);
	cr_assert_neq(e, 0, "not translated");
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)lo, jit_fetch, NULL), 0);
	gb_jit__ring_reset(jit);
	static struct ref_rec want[4096];
	size_t n = 0;
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		child((uint64_t)lo, e);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_EXITKILL);
	for (;;) { /* the native run, one step at a time, to the second stop */
		cr_assert_eq(ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL), 0);
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		cr_assert(WIFSTOPPED(st), "status %#x", st);
		if (WSTOPSIG(st) == SIGSTOP)
			break;
		struct user_regs_struct r;
		ptrace(PTRACE_GETREGS, pid, NULL, &r);
		if (r.rip < (uint64_t)lo || r.rip >= (uint64_t)end)
			continue;
		const struct gb_insn *in = jit_fetch(NULL, r.rip);
		struct gb_cpu cpu;
		gb_cpu_from_regs(&cpu, &r);
		static struct gb_vec vec;
		if (in->flags & GB_INSN_NEEDS_VEC) {
			cr_assert_eq(gb_vec_read(pid, &vec), 0);
			cpu.vec = &vec;
		}
		cr_assert_lt(n, 4096);
		want[n].pc = r.rip;
		want[n].nacc = gb_insn_accesses(in, &cpu, want[n].acc, 64);
		cr_assert_geq(want[n].nacc, 0);
		n++;
	}
	/* stepping a popf leaves TF set as the program's own (the kernel cannot
	 * tell it from a popf that sets it): not the translated run's */
	struct user_regs_struct r;
	ptrace(PTRACE_GETREGS, pid, NULL, &r);
	r.eflags &= ~0x100ull;
	ptrace(PTRACE_SETREGS, pid, NULL, &r);
	cr_assert_eq(ptrace(PTRACE_CONT, pid, NULL, NULL), 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	if (WIFSTOPPED(st)) {
		struct user_regs_struct r;
		ptrace(PTRACE_GETREGS, pid, NULL, &r);
		struct gb_jit_loc loc;
		gb_jit__locate(jit, r.rip, &loc);
		cr_log_error("stopped at %#llx (cache +%#llx, pc %#lx) eflags %#llx", r.rip,
			     r.rip - mem.code_addr, loc.pc, r.eflags);
	}
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "translated, not the native result (status %#x)", st);
	cr_assert_gt(n, 10);
	size_t pos = 0, k = 0;
	struct gb_jit_rec rec;
	int rc;
	while ((rc = gb_jit__ring_next(jit, &pos, 0, 0, &rec)) == 1) {
		if (rec.kind == GB_JIT_REC_MARK)
			continue;
		cr_assert_lt(k, n, "more records than steps");
		const struct ref_rec *w = &want[k];
		cr_assert_eq(rec.pc, w->pc, "record %zu: pc %#lx, stepping %#lx", k, rec.pc, w->pc);
		cr_assert_eq(rec.nacc, w->nacc, "record %zu (pc %#lx): %d accesses, stepping %d", k, rec.pc,
			     rec.nacc, w->nacc);
		for (int a = 0; a < w->nacc; a++)
			cr_assert(rec.acc[a].addr == w->acc[a].addr && rec.acc[a].size == w->acc[a].size &&
				  rec.acc[a].write == w->acc[a].write,
				  "record %zu (pc %#lx) access %d: %#lx/%u/%d, stepping %#lx/%u/%d", k, rec.pc,
				  a, rec.acc[a].addr, rec.acc[a].size, rec.acc[a].write, w->acc[a].addr,
				  w->acc[a].size, w->acc[a].write);
		k++;
	}
	cr_assert_eq(rc, 0, "the ring holds garbage");
	cr_assert_eq(k, n, "%zu records, %zu steps", k, n);
}

Test(jit_insns, rep_strings_give_a_record_per_iteration_as_stepping_does)
{
	same_as_stepping(ti_rep, ti_rep_end);
}

Test(jit_insns, bit_tests_with_a_register_offset_address_the_unit_holding_the_bit)
{
	same_as_stepping(ti_bt, ti_bt_end);
}

Test(jit_insns, enter_and_popf_run_translated)
{
	same_as_stepping(ti_misc, ti_misc_end);
}

Test(jit_insns, gathers_and_masked_moves_access_their_active_elements)
{
	if (!__builtin_cpu_supports("avx2"))
		cr_skip_test("no AVX2 on this processor");
	same_as_stepping(ti_vec, ti_vec_end);
}

Test(jit_insns, opmask_masked_accesses_run_translated_as_stepping_gives_them)
{
	if (!__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl"))
		cr_skip_test("no AVX-512 BW and VL on this processor");
	same_as_stepping(ti_k, ti_k_end);
}

/* A popf that sets TF: the thread leaves for the original popf (popf.c),
 * so the trap comes after the next instruction as natively; no record of
 * the popf, one miss logged at it. */
extern uint8_t ti_tf[], ti_tf_popf[], ti_tf_after[], ti_tf_end[];
__asm__(
	".text\n"
	".globl ti_tf, ti_tf_popf, ti_tf_after, ti_tf_end\n"
	"ti_tf:\n"
	"	pushq $0x102\n"
	"ti_tf_popf:\n"
	"	popfq\n"
	"	lea 1(%rdi), %rax\n"
	"ti_tf_after:\n"
	"	lea 1(%rax), %rax\n"
	"	ret\n"
	"ti_tf_end:\n");

static volatile uint64_t tf_rip;
static volatile int tf_traps;

static void on_trap(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;
	(void)sig;
	(void)si;
	tf_rip = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
	tf_traps++;
	uc->uc_mcontext.gregs[REG_EFL] &= ~0x100;
}

Test(jit_insns, a_popf_setting_tf_leaves_for_the_original_popf)
{
	mem = jit_map_near((uint64_t)ti_tf);
	jit = jit_open_nostop(&mem, ti_tf, ti_tf_end, 200);
	struct sigaction sa = { .sa_sigaction = on_trap, .sa_flags = SA_SIGINFO }, old;
	sigaction(SIGTRAP, &sa, &old);
	long want = run((long (*)(long))(uintptr_t)ti_tf);
	cr_assert_eq(tf_traps, 1);
	cr_assert_eq(tf_rip, (uint64_t)ti_tf_after, "natively after the lea: %#lx", tf_rip);
	uint64_t e = gb_jit__entry(jit, (uint64_t)ti_tf, jit_fetch, NULL);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)ti_tf, jit_fetch, NULL), 0);
	gb_jit__ring_reset(jit);
	long got = run((long (*)(long))(uintptr_t)e);
	sigaction(SIGTRAP, &old, NULL);
	cr_assert_eq(got, want);
	cr_assert_eq(tf_traps, 2, "%d traps", tf_traps);
	cr_assert_eq(tf_rip, (uint64_t)ti_tf_after, "translated: the trap at %#lx", tf_rip);
	size_t pos = 0, n = 0;
	struct gb_jit_rec rec;
	while (gb_jit__ring_next(jit, &pos, 0, 0, &rec) == 1)
		if (rec.kind == GB_JIT_REC_INSN) {
			cr_assert_eq(rec.pc, (uint64_t)ti_tf, "a record of %#lx", rec.pc);
			n++;
		}
	cr_assert_eq(n, 1, "the push only");
	cr_assert_eq(gb_jit__lock_try(jit), 1, "the lock released");
	static struct gb_jit_misses ms;
	gb_jit__misses(jit, &ms, true);
	gb_jit__lock_release(jit);
	cr_assert_eq(ms.count, 1);
	cr_assert_eq(ms.pc[0], (uint64_t)ti_tf_popf);
}

/* Instructions that only raise a signal, in the cache: ud2 (SIGILL) and hlt
 * (SIGSEGV, #GP in user mode) stop at their copy (the record of the
 * instruction kept: stepping writes it too), int3 (SIGTRAP) after it (rip
 * past it: the next instruction's boundary). */
extern uint8_t ti_ud2[], ti_ud2_at[], ti_hlt[], ti_hlt_at[], ti_int3[], ti_int3_at[], ti_sig_end[];
__asm__(
	".text\n"
	".globl ti_ud2, ti_ud2_at, ti_hlt, ti_hlt_at, ti_int3, ti_int3_at, ti_sig_end\n"
	"ti_ud2:\n"
	"	lea 1(%rdi), %rax\n"
	"ti_ud2_at:\n"
	"	ud2\n"
	"ti_hlt:\n"
	"	lea 2(%rdi), %rax\n"
	"ti_hlt_at:\n"
	"	hlt\n"
	"ti_int3:\n"
	"	lea 3(%rdi), %rax\n"
	"ti_int3_at:\n"
	"	int3\n"
	"	add $1, %rax\n"
	"	ret\n"
	"ti_sig_end:\n");

static void raises(const uint8_t *fn, int sig, uint64_t at, bool past)
{
	uint64_t e = gb_jit__entry(jit, (uint64_t)fn, jit_fetch, NULL);
	cr_assert_neq(e, 0, "not translated");
	gb_jit__ring_reset(jit);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		raise(SIGSTOP);
		run((long (*)(long))(uintptr_t)e);
		_exit(0);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_EXITKILL);
	cr_assert_eq(ptrace(PTRACE_CONT, pid, NULL, NULL), 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFSTOPPED(st) && WSTOPSIG(st) == sig, "status %#x, want signal %d", st, sig);
	struct user_regs_struct r;
	ptrace(PTRACE_GETREGS, pid, NULL, &r);
	cr_assert(gb_jit__in_code(jit, r.rip), "raised outside the cache");
	struct gb_jit_loc loc;
	cr_assert_eq(gb_jit__locate(jit, r.rip, &loc), 0);
	cr_assert_eq(loc.at_insn, !past, "at the instruction's copy: %d", loc.at_insn);
	struct gb_jit_unwound uo;
	if (past) {
		cr_assert_eq(gb_jit__unwind(jit, &r, NULL, &uo), 0);
		cr_assert_eq(r.rip, at + 1, "put past it: %#llx", r.rip);
	} else {
		cr_assert_eq(loc.pc, at);
	}
	uint64_t last = 0;
	size_t pos = 0;
	struct gb_jit_rec rec;
	while (gb_jit__ring_next(jit, &pos, 0, 0, &rec) == 1)
		if (rec.kind == GB_JIT_REC_INSN)
			last = rec.pc;
	cr_assert_eq(last, at, "the last record is of %#lx, not of the raising instruction", last);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	gb_jit__lock_release(jit);
}

Test(jit_insns, signal_only_instructions_raise_at_their_original_boundary)
{
	mem = jit_map_near_as((uint64_t)ti_ud2, true);
	jit = jit_open_nostop(&mem, ti_ud2, ti_sig_end, 200);
	raises(ti_ud2, SIGILL, (uint64_t)ti_ud2_at, false);
	raises(ti_hlt, SIGSEGV, (uint64_t)ti_hlt_at, false);
	raises(ti_int3, SIGTRAP, (uint64_t)ti_int3_at, true);
}
