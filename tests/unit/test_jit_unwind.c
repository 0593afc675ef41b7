/* gb_jit__unwind (user/jit/unwind.c): a child sharing the cache runs a
 * translated function; it is stopped after k single-steps in the cache,
 * for every k until it leaves, unwound to an original boundary and let go
 * natively from there.  Its result and the registers it checks must be
 * the native run's, the lock free, and the ring without a record of an
 * instruction that did not run. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <asm/prctl.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "decode/decode.h"
#include "jit/jit.h"
#include "jit_util.h"

/* n rounds of: flags into an add, a direct and an indirect call in the
 * range, a system call in the range (getpid); then a call out, a pop and a
 * ret.  Returns a value of n only; rbx kept. */
extern uint8_t uw_f[], uw_f_end[], uw_ret_site[];
__asm__(
	".text\n"
	".globl uw_f, uw_f_end, uw_ret_site, uw_out\n"
	"uw_f:\n"
	"	push %rbx\n"
	"	mov %rdi, %rbx\n"
	"	xor %eax, %eax\n"
	"1:	add %rbx, %rax\n"
	"	adc $3, %rax\n"
	"	mov %rax, %rdi\n"
	"	call uw_dbl\n"
	"	lea uw_dbl(%rip), %rcx\n"
	"	mov %rax, %rdi\n"
	"	call *%rcx\n"
	"	mov %rax, %r8\n"
	"	mov $39, %eax\n"
	"	syscall\n"
	"	mov %r8, %rax\n"
	"	dec %rbx\n"
	"	jnz 1b\n"
	"	mov %rax, %rdi\n"
	"	call uw_out\n"
	"uw_ret_site:\n"
	"	pop %rbx\n"
	"	ret\n"
	"uw_dbl:\n"
	"	lea (%rdi,%rdi), %rax\n"
	"	ret\n"
	"uw_f_end:\n"
	"uw_out:\n"
	"	lea 1(%rdi), %rax\n"
	"	ret\n");

/* REP string instructions (the stop-free mode runs them one iteration
 * per pass, user/jit/rep.c): counts UW_REP_N and 0, both directions,
 * repe cmps stopping on a mismatch, repe scas running out.  A stop in the
 * middle of one unwinds to the instruction with rcx, rsi and rdi as after
 * the iterations done.  A popf first (its TF check, popf.c).  Returns a sum
 * of what it wrote and where it ended. */
#define UW_REP_N 5
extern uint8_t uw_rep[], uw_rep_end[];
__asm__(
	".text\n"
	".globl uw_rep, uw_rep_end\n"
	"uw_rep:\n"
	"	push %rbx\n"
	"	mov %rdi, %rbx\n"
	"	mov %rdi, %rax\n"
	"	pushq $0xc7\n"              /* popf (its TF check uses rax, rcx): */
	"	popfq\n"
	"	adc %rax, %rbx\n"           /* rax and CF into rbx */
	"	cld\n"
	"	lea uw_src(%rip), %rdi\n"
	"	mov $0x11, %eax\n"
	"	mov $5, %ecx\n"
	"	rep stosb\n"
	"	lea uw_src(%rip), %rsi\n"
	"	lea uw_dst(%rip), %rdi\n"
	"	mov $5, %ecx\n"
	"	rep movsb\n"
	"	xor %ecx, %ecx\n"
	"	rep movsq\n"
	"	std\n"
	"	lea uw_dst+32(%rip), %rdi\n"
	"	mov $5, %ecx\n"
	"	mov %rbx, %rax\n"
	"	rep stosq\n"
	"	cld\n"
	"	lea uw_src(%rip), %rsi\n"
	"	lea uw_dst(%rip), %rdi\n"
	"	mov $5, %ecx\n"
	"	repe cmpsb\n"
	"	lea uw_src(%rip), %rdi\n"
	"	mov $0x11, %eax\n"
	"	mov $5, %ecx\n"
	"	repe scasb\n"
	"	mov uw_dst(%rip), %rax\n"
	"	add uw_dst+32(%rip), %rax\n"
	"	add %rcx, %rax\n"
	"	add %rdi, %rax\n"
	"	add %rsi, %rax\n"
	"	pop %rbx\n"
	"	ret\n"
	"uw_rep_end:\n"
	".data\n"
	"uw_src: .fill 48, 1, 0\n"
	"uw_dst: .fill 48, 1, 0\n"
	".text\n");

/* Entries whose first 5 bytes hold a call, a jcc taken, a jcc not taken,
 * a jmp, a loop back into them (the owner check's native path relocates
 * each: user/jit/reloc.c).  Each returns a value of n only. */
extern uint8_t uw_br[], uw_bcall[], uw_bjcc[], uw_bjnz[], uw_bjmp[], uw_bloop[], uw_br_end[];
__asm__(
	".text\n"
	".globl uw_br, uw_bcall, uw_bjcc, uw_bjnz, uw_bjmp, uw_bloop, uw_br_end\n"
	"uw_br:\n"
	"uw_bcall:\n"
	"	call uw_btwice\n"            /* call rel32 */
	"	add $1, %rax\n"
	"	ret\n"
	"uw_btwice:\n"
	"	lea (%rdi,%rdi), %rax\n"
	"	ret\n"
	"uw_bjcc:\n"
	"	cmp $3, %rdi\n"
	"	je 1f\n"                     /* taken for 3 */
	"	xor %eax, %eax\n"
	"	ret\n"
	"1:	lea 7(%rdi), %rax\n"
	"	ret\n"
	"uw_bjnz:\n"
	"	test %rdi, %rdi\n"
	"	.byte 0x0f, 0x84\n"          /* jz rel32, not taken */
	"	.long 1f - . - 4\n"
	"	lea 9(%rdi), %rax\n"
	"	ret\n"
	"1:	xor %eax, %eax\n"
	"	ret\n"
	"uw_bjmp:\n"
	"	jmp 1f\n"
	"	ud2\n"
	"	ud2\n"
	"1:	lea 11(%rdi), %rax\n"
	"	ret\n"
	"uw_bloop:\n"
	"	mov %rdi, %rcx\n"
	"2:	loop 2b\n"                   /* back to itself: its copy */
	"	lea 13(%rdi,%rcx), %rax\n"
	"	ret\n"
	"uw_br_end:\n");

static struct gb_jit_mem mem;
static struct gb_jit *jit;
static long (*uw_fn)(long) = (long (*)(long))(uintptr_t)uw_f; /* what the child runs */
static int mid_rep; /* stops unwound into the middle of a REP loop */

static void teardown(void)
{
	gb_jit__free(jit);
	munmap(mem.code, GB_JIT_SIZE);
}

TestSuite(jit_unwind, .fini = teardown);

static void open_shared(void)
{
	mem = jit_map_near_as((uint64_t)uw_f, true);
	jit = jit_open_nostop(&mem, uw_f, uw_f_end, 200);
}

/* The child: the native result first, then the translated run; exit 0
 * when they agree and rbx (callee-saved) survived. */
static __attribute__((noreturn)) void child(uint64_t e)
{
	long want = uw_fn(3);
	ptrace(PTRACE_TRACEME, 0, NULL, NULL);
	raise(SIGSTOP);
	long got;
	uint64_t rbx_in = 0x1234567890abcdefull, rbx_out;
	__asm__ volatile("mov %[in], %%rbx\n\t"
			 "mov $3, %%edi\n\t"
			 "lea -128(%%rsp), %%rsp\n\t"
			 "call *%[e]\n\t"
			 "lea 128(%%rsp), %%rsp\n\t"
			 "mov %%rbx, %[out]"
			 : "=a"(got), [out] "=&r"(rbx_out)
			 : [e] "r"(e), [in] "r"(rbx_in)
			 : "rbx", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "memory", "cc");
	_exit(got == want && rbx_out == rbx_in ? 0 : 3);
}

/* Run a child to its k-th step in the cache; unwind it there and let it
 * go natively.  Returns false when it left the cache before k steps.
 *
 * every_step's first run single-steps the child through the whole cache
 * and keeps the pc of each step (seq); the runs for each k then reach the
 * k-th step by a breakpoint (int3 written into the shared cache) at its pc,
 * passed over as often as that pc began a run of steps before it, and
 * single-step from there only through a REP's iterations (or a loop
 * instruction's jumps to itself): the same state as k single-steps, with
 * a few stops where k steps were k^2/2 in all (90 s of this suite). */
static uint64_t budget; /* 0, or the ring's budget word to start with */
static pid_t cur_child;  /* the child run_to runs */
static uint64_t *seq;    /* the pc after each step in the cache (every_step) */
static int seq_n, seq_cap;

/* One single-step of the child (the k-th step's run, for messages). */
static void step1(pid_t pid, int k)
{
	int st;
	cr_assert_eq(ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL), 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFSTOPPED(st), "step %d: status %#x", k, st);
}

/* Single-step the child k steps in the cache (or until it leaves it: true),
 * keeping each step's pc in seq when recording. */
static bool step_to(pid_t pid, int k, struct user_regs_struct *r, bool recording)
{
	int n = 0;
	bool was_in = false;
	for (;;) {
		step1(pid, n);
		ptrace(PTRACE_GETREGS, pid, NULL, r);
		bool in = gb_jit__in_code(jit, r->rip);
		if (in)
			was_in = true;
		if (was_in && !in)
			return true;
		if (!in)
			continue;
		if (recording) {
			if (seq_n == seq_cap) {
				seq_cap = seq_cap ? 2 * seq_cap : 1024;
				seq = realloc(seq, seq_cap * sizeof(*seq));
				cr_assert_not_null(seq);
			}
			seq[seq_n++] = r->rip;
		}
		if (++n == k)
			return false;
	}
}

/* The child at its k-th step in the cache (k <= seq_n), by a breakpoint. */
static void break_at(pid_t pid, int k, struct user_regs_struct *r)
{
	uint64_t pc = seq[k - 1];
	int first = k - 1, st;
	while (first > 0 && seq[first - 1] == pc)
		first--;
	int hits = 0; /* runs of steps at pc up to the k-th step's */
	for (int i = 0; i <= first; i++)
		hits += seq[i] == pc && (i == 0 || seq[i - 1] != pc);
	uint8_t *at = mem.code + (pc - mem.code_addr), saved = *at;
	*at = 0xcc;
	for (int h = 1;; h++) {
		cr_assert_eq(ptrace(PTRACE_CONT, pid, NULL, NULL), 0);
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		cr_assert(WIFSTOPPED(st) && WSTOPSIG(st) == SIGTRAP, "step %d: status %#x", k, st);
		ptrace(PTRACE_GETREGS, pid, NULL, r);
		cr_assert_eq(r->rip, pc + 1, "step %d: a stop at %#llx, not the breakpoint", k, r->rip);
		*at = saved;
		r->rip = pc;
		ptrace(PTRACE_SETREGS, pid, NULL, r);
		if (h == hits)
			break;
		/* over this run of pc's steps, then the breakpoint back */
		do {
			step1(pid, k);
			ptrace(PTRACE_GETREGS, pid, NULL, r);
		} while (r->rip == pc);
		*at = 0xcc;
	}
	for (int i = first; i < k - 1; i++)
		step1(pid, k);
	ptrace(PTRACE_GETREGS, pid, NULL, r);
	cr_assert_eq(r->rip, pc, "step %d: at %#llx, not the step's %#lx", k, r->rip, pc);
}

static bool run_to(uint64_t e, int k, uint64_t *pc, struct gb_jit_unwound *uo, bool by_break)
{
	gb_jit__ring_reset(jit);
	if (budget) /* the data part's word 136 (docs/trace.md): the slow path at once */
		memcpy(mem.data + 136, &budget, 8);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		child(e);
	cur_child = pid;
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFSTOPPED(st));
	ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_EXITKILL);
	bool left = false;
	struct user_regs_struct r;
	if (by_break)
		break_at(pid, k, &r);
	else
		left = step_to(pid, k, &r, true);
	if (!left) {
		uint64_t rip = r.rip;
		cr_assert_eq(gb_jit__unwind(jit, &r, NULL, uo), 0, "step %d: rip +%#lx", k,
			     rip - mem.code_addr);
		*pc = r.rip;
		cr_assert_eq(r.rip, uo->pc);
		cr_assert(!gb_jit__in_code(jit, r.rip), "step %d: unwound into the cache", k);
		uint64_t left_budget;
		memcpy(&left_budget, mem.data + 136, 8);
		cr_assert_neq(left_budget, 0, "step %d (+%#lx): the budget left at 0 (the next head "
			      "would not leave for the slow path)", k, rip - mem.code_addr);
		cr_assert_eq(gb_jit__lock_word(jit), 0, "step %d (+%#lx): the lock not released (%u; ns %d held %d)", k,
			     rip - mem.code_addr, gb_jit__lock_word(jit), uo->ns, uo->held);
		/* the ring's last record ran (a loop of one instruction aside) */
		size_t pos = 0, trail = 0;
		uint64_t last = 0;
		struct gb_jit_rec rec;
		while (gb_jit__ring_next(jit, &pos, 0, 0, &rec) == 1)
			if (rec.kind == GB_JIT_REC_INSN) {
				trail = rec.pc == last ? trail + 1 : 1;
				last = rec.pc;
			}
		const struct gb_insn *at = jit_fetch(NULL, r.rip);
		if (at && (at->flags & GB_INSN_REP)) {
			/* as the hardware resumes it: a record per iteration done */
			size_t done = r.rcx ? UW_REP_N - r.rcx : 0;
			cr_assert_eq(last == r.rip ? trail : 0, done,
				     "step %d (+%#lx): at the REP %#llx with rcx %llu after %zu records of it",
				     k, rip - mem.code_addr, r.rip, r.rcx, last == r.rip ? trail : 0);
			mid_rep += done > 0;
		} else {
			cr_assert(last != r.rip || uo->recorded,
				  "step %d (+%#lx): the record of %#lx, not run, kept", k,
				  rip - mem.code_addr, last);
		}
		ptrace(PTRACE_SETREGS, pid, NULL, &r);
	}
	/* stepping a popf leaves TF set as the program's own (the kernel cannot
	 * tell it from a popf that sets it): not the program's */
	ptrace(PTRACE_GETREGS, pid, NULL, &r);
	r.eflags &= ~0x100ull;
	ptrace(PTRACE_SETREGS, pid, NULL, &r);
	cr_assert_eq(ptrace(PTRACE_CONT, pid, NULL, NULL), 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st), "step %d: the child did not finish (status %#x)", k, st);
	cr_assert_eq(WEXITSTATUS(st), 0, "step %d: unwound at %#lx, not the native result", k, *pc);
	return !left;
}

/* Every k until the child leaves the cache: kinds[ns] counts the stops in
 * each kind of piece. */
static int every_step(uint64_t e, int *held, int kinds[8])
{
	uint64_t pc = 0;
	struct gb_jit_unwound uo;
	seq_n = 0;
	cr_assert(!run_to(e, INT32_MAX, &pc, &uo, false), "the child never left the cache");
	int k = 1;
	for (; k <= seq_n && run_to(e, k, &pc, &uo, true); k++) {
		*held += uo.held;
		kinds[uo.ns & 7]++;
	}
	return k;
}

Test(jit_unwind, at_every_step_in_the_cache_the_native_run_goes_on)
{
	open_shared();
	uint64_t e = gb_jit__entry(jit, (uint64_t)uw_f, jit_fetch, NULL);
	cr_assert_neq(e, 0);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)uw_f, jit_fetch, NULL), 0);
	cr_assert_neq(gb_jit__entry(jit, (uint64_t)uw_ret_site, jit_fetch, NULL), 0);
	int held = 0, kinds[8] = { 0 };
	int k = every_step(e, &held, kinds);
	cr_assert_gt(k, 300, "only %d steps in the cache", k);
	cr_assert_gt(held, k / 2, "%d of %d stops held the lock", held, k);
	for (int n = GB_JIT_NS_NONE; n <= GB_JIT_NS_LOOKUP; n++)
		cr_assert_gt(kinds[n], 0, "no stop in a piece of kind %d", n);
}

Test(jit_unwind, in_the_middle_of_a_rep_loop_it_resumes_as_the_hardware)
{
	mem = jit_map_near_as((uint64_t)uw_rep, true);
	jit = jit_open_nostop(&mem, uw_rep, uw_rep_end, 200);
	uw_fn = (long (*)(long))(uintptr_t)uw_rep;
	uint64_t e = gb_jit__entry(jit, (uint64_t)uw_rep, jit_fetch, NULL);
	cr_assert_neq(e, 0);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)uw_rep, jit_fetch, NULL), 0);
	int held = 0, kinds[8] = { 0 };
	mid_rep = 0;
	int k = every_step(e, &held, kinds);
	cr_assert_gt(k, 200, "only %d steps in the cache", k);
	cr_assert_gt(mid_rep, 20, "%d stops in the middle of a REP loop", mid_rep);
	/* and with the ring's budget spent at the first head (the slow path) */
	budget = 1;
	mid_rep = 0;
	k = every_step(e, &held, kinds);
	budget = 0;
	cr_assert_gt(mid_rep, 20, "%d stops in the middle of a REP loop (slow path)", mid_rep);
	cr_assert_gt(kinds[GB_JIT_NS_RING], 20);
}

Test(jit_unwind, through_exit_stubs_and_the_rings_slow_path)
{
	/* the entry's block only (its in-range exits are stubs), and a budget
	 * spent at the first head */
	open_shared();
	uint64_t e = gb_jit__entry(jit, (uint64_t)uw_f, jit_fetch, NULL);
	cr_assert_neq(e, 0);
	budget = 1;
	int held = 0, kinds[8] = { 0 };
	int k = every_step(e, &held, kinds);
	budget = 0;
	cr_assert_gt(k, 60, "only %d steps in the cache", k);
	cr_assert_gt(kinds[GB_JIT_NS_RING], 20, "%d stops in the ring's slow path", kinds[GB_JIT_NS_RING]);
	cr_assert_gt(kinds[GB_JIT_NS_NONE], 0);
}

Test(jit_unwind, a_thread_asleep_in_the_acquire_goes_back_to_its_entry)
{
	open_shared();
	uint64_t e = gb_jit__entry(jit, (uint64_t)uw_f, jit_fetch, NULL);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)uw_f, jit_fetch, NULL), 0);
	gb_jit__ring_reset(jit);
	cr_assert_eq(gb_jit__lock_try(jit), 1, "this process takes the free lock");
	cr_assert_eq(gb_jit__lock_try(jit), 0, "not twice");
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		child(e);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_EXITKILL);
	cr_assert_eq(ptrace(PTRACE_CONT, pid, NULL, NULL), 0);
	for (int k = 0; k < 200 && gb_jit__lock_word(jit) != 2; k++)
		usleep(5000);
	cr_assert_eq(gb_jit__lock_word(jit), 2, "the child waits for the lock");
	usleep(20000); /* in its FUTEX_WAIT */
	kill(pid, SIGSTOP);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP);
	struct user_regs_struct r;
	ptrace(PTRACE_GETREGS, pid, NULL, &r);
	cr_assert(gb_jit__in_code(jit, r.rip));
	cr_assert_eq(r.orig_rax, 202, "stopped in the futex");
	struct gb_jit_unwound uo;
	cr_assert_eq(gb_jit__unwind(jit, &r, NULL, &uo), 0);
	cr_assert_eq(uo.ns, GB_JIT_NS_LOCK);
	cr_assert(!uo.held);
	cr_assert_eq(r.rip, (uint64_t)uw_f, "back at its entry");
	cr_assert_eq((long long)r.orig_rax, -1, "the futex not restarted at the original pc");
	cr_assert_eq(r.rdi, 3);
	cr_assert_eq(gb_jit__lock_word(jit), 2, "still this process's");
	ptrace(PTRACE_SETREGS, pid, NULL, &r);
	gb_jit__lock_release(jit);
	cr_assert_eq(ptrace(PTRACE_CONT, pid, NULL, NULL), 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
	cr_assert_eq(gb_jit__lock_word(jit), 0);
	size_t pos = 0;
	struct gb_jit_rec rec;
	cr_assert_eq(gb_jit__ring_next(jit, &pos, 0, 0, &rec), 0, "no record: it never entered");
}

/* The owner check (user/jit/owner.c): the child's stack read through this
 * (this process's memory before there is a child: the key at fs:0, which
 * the forked child has too). */
static int read_child(void *ctx, uint64_t addr, void *buf, size_t n)
{
	struct iovec l = { buf, n }, r = { (void *)(uintptr_t)addr, n };
	(void)ctx;
	return process_vm_readv(cur_child ? cur_child : getpid(), &l, 1, &r, 1, 0) == (ssize_t)n
		       ? 0 : -1;
}

/* Another thread's TCB, as the TLS ABI has it: its first word points to
 * itself. */
static uint64_t other_tcb[8];

/* A translator over [lo, end) with the owner check (tcb: its fs:0 form,
 * for CPUs without FSGSBASE), area 0's owner this thread (the forked
 * child's fs base is the same) or, when !owner, another: an fs base 0x1000
 * off this thread's, or with tcb a TCB of its own. */
static void open_checked_over(const void *lo, const void *end, bool owner, bool tcb)
{
	if (!tcb && !(getauxval(AT_HWCAP2) & (1 << 1)))
		cr_skip_test("no FSGSBASE (rdfsbase) here (the fs:0 form of the test runs)");
	mem = jit_map_near_as((uint64_t)lo, true);
	struct gb_jit_opts o = { .nostop = true, .ring_timeout_ms = 200, .owner_check = true,
				 .owner_tcb = tcb, .read = read_child };
	jit = gb_jit__new_opts(&mem, (uint64_t)lo, (uint64_t)end - 1, &o);
	cr_assert_not_null(jit);
	cr_assert_eq(syscall(SYS_arch_prctl, ARCH_SET_GS, gb_jit__tls(jit, 0)), 0);
	unsigned long fs = 0;
	cr_assert_eq(syscall(SYS_arch_prctl, ARCH_GET_FS, &fs), 0);
	cr_assert_eq(*(unsigned long *)fs, fs, "glibc's TCB self-pointer at fs:0");
	cur_child = 0;
	other_tcb[0] = (uint64_t)other_tcb;
	gb_jit__area_fs(jit, 0, owner ? fs : tcb ? (uint64_t)other_tcb : fs + 0x1000);
}

static uint64_t open_checked(bool owner, bool tcb)
{
	open_checked_over(uw_f, uw_f_end, owner, tcb);
	uint64_t e = gb_jit__entry(jit, (uint64_t)uw_f, jit_fetch, NULL);
	cr_assert_neq(e, 0);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)uw_f, jit_fetch, NULL), 0);
	return e;
}

static void owner_every_step(bool tcb)
{
	uint64_t e = open_checked(true, tcb);
	int held = 0, kinds[8] = { 0 };
	int k = every_step(e, &held, kinds);
	cr_assert_gt(k, 300, "only %d steps in the cache", k);
	cr_assert_gt(held, k / 2, "%d of %d stops held the lock", held, k);
	cr_assert_gt(kinds[GB_JIT_NS_ENTRY], 14, "%d stops in the entry", kinds[GB_JIT_NS_ENTRY]);
	cr_assert_eq(kinds[GB_JIT_NS_NATIVE], 0, "the owner ran the native copy");
}

static void not_owner_entry(bool tcb)
{
	uint64_t e = open_checked(false, tcb);
	int held = 0, kinds[8] = { 0 };
	int k = every_step(e, &held, kinds);
	cr_assert_eq(held, 0, "it took the lock");
	cr_assert_gt(kinds[GB_JIT_NS_NATIVE], 2, "%d stops in the native copy", kinds[GB_JIT_NS_NATIVE]);
	cr_assert_lt(k, 40, "%d steps in the cache", k);
	cr_assert_eq(gb_jit__ring_used(jit), 0, "it wrote records");
}

/* gebpf gone (user/jit/live.c): the owner too runs the native copy, and a
 * stop at each of its steps unwinds to the original code. */
static void gone_entry(bool tcb)
{
	uint64_t e = open_checked(true, tcb);
	gb_jit__live_end(jit);
	int held = 0, kinds[8] = { 0 };
	int k = every_step(e, &held, kinds);
	cr_assert_eq(held, 0, "it took the lock");
	cr_assert_gt(kinds[GB_JIT_NS_NATIVE], 2, "%d stops in the native copy", kinds[GB_JIT_NS_NATIVE]);
	cr_assert_lt(k, 40, "%d steps in the cache", k);
	cr_assert_eq(gb_jit__ring_used(jit), 0, "it wrote records");
}

static void not_owner_relocated(bool tcb)
{
	static uint8_t *const f[] = { uw_bcall, uw_bjcc, uw_bjnz, uw_bjmp, uw_bloop };
	/* its stops in the copy: push + jmp; cmp + jcc + jmp; test + jcc + the jump
	 * back; jmp; mov + (loop + jmp) x 2 + loop + jmp short + the jump back */
	static const int native[] = { 2, 3, 3, 1, 8 };
	open_checked_over(uw_br, uw_br_end, false, tcb);
	for (unsigned i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		uint64_t e = gb_jit__entry(jit, (uint64_t)f[i], jit_fetch, NULL);
		cr_assert_neq(e, 0, "function %u: no entry block", i);
		uw_fn = (long (*)(long))(uintptr_t)f[i];
		int held = 0, kinds[8] = { 0 };
		int k = every_step(e, &held, kinds);
		cr_assert_eq(held, 0, "function %u: it took the lock", i);
		cr_assert_eq(kinds[GB_JIT_NS_NATIVE], native[i], "function %u: %d stops in the native copy",
			     i, kinds[GB_JIT_NS_NATIVE]);
		cr_assert_gt(k, 12, "function %u: %d steps in the cache", i, k);
		cr_assert_eq(gb_jit__ring_used(jit), 0, "function %u: it wrote records", i);
	}
	struct gb_jit_stats js;
	gb_jit__stats(jit, &js);
	cr_assert_eq(js.owner_checks, js.entries, "%lu of %lu entries checked",
		     (unsigned long)js.owner_checks, (unsigned long)js.entries);
	uw_fn = (long (*)(long))(uintptr_t)uw_f;
}

Test(jit_unwind, the_owner_check_at_every_step) { owner_every_step(false); }
Test(jit_unwind, the_owner_check_by_fs0_at_every_step) { owner_every_step(true); }
Test(jit_unwind, a_thread_not_the_areas_owner_runs_the_entry_natively) { not_owner_entry(false); }
Test(jit_unwind, by_fs0_a_thread_not_the_areas_owner_runs_the_entry_natively)
{
	not_owner_entry(true);
}
Test(jit_unwind, a_thread_not_the_owner_runs_relocated_calls_and_branches_at_every_step)
{
	not_owner_relocated(false);
}
Test(jit_unwind, by_fs0_a_thread_not_the_owner_runs_relocated_calls_and_branches_at_every_step)
{
	not_owner_relocated(true);
}
Test(jit_unwind, once_gebpf_is_gone_the_owner_runs_the_entry_natively) { gone_entry(false); }
Test(jit_unwind, by_fs0_once_gebpf_is_gone_the_owner_runs_the_entry_natively) { gone_entry(true); }
