/* Counting twins (user/jit/twin*.c; docs/trace.md "Counting
 * after the budget"), in this process: functions translated into a cache
 * mapped here with their twins, called through their entry blocks.  With
 * the counting switch on they run their twins: the native result, no lock,
 * no record (but for what is left to the recording blocks: a popf), and
 * the thread's area counts exactly what the recording blocks' records of
 * the same run hold.  A forked child sharing the cache is stopped at every
 * step of a twin, unwound, and sent back in through an entry: the counts
 * it ends with are those of one uninterrupted run. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "decode/decode.h"
#include "jit/jit.h"
#include "jit_util.h"

/* n rounds of: flags into an add (a flag-free head: adc first in its
 * block), a direct and an indirect call in the range, a jump table (an
 * indexed read), a system call (getpid), a push and a pop; then a call out
 * and a ret out.  Returns a value of n only; rbx and r12 kept. */
extern uint8_t cn_f[], cn_f_end[];
__asm__(
	".text\n"
	".globl cn_f, cn_f_end, cn_out\n"
	"cn_f:\n"
	"	push %rbx\n"
	"	push %r12\n"
	"	mov %rdi, %rbx\n"
	"	xor %eax, %eax\n"
	"	lea cn_tbl(%rip), %r12\n"
	"1:	add %rbx, %rax\n"
	"	adc $3, %rax\n"
	"	mov %rax, %rdi\n"
	"	call cn_dbl\n"
	"	lea cn_dbl(%rip), %rcx\n"
	"	mov %rax, %rdi\n"
	"	call *%rcx\n"
	"	mov %rbx, %rcx\n"
	"	and $1, %ecx\n"
	"	jmp *(%r12,%rcx,8)\n"
	"cn_t0:	add $5, %rax\n"
	"	jmp 2f\n"
	"cn_t1:	sub $1, %rax\n"
	"2:	mov %rax, %r8\n"
	"	mov $39, %eax\n"
	"	syscall\n"
	"	mov %r8, %rax\n"
	"	push %rax\n"
	"	pop %rax\n"
	"	dec %rbx\n"
	"	jnz 1b\n"
	"	mov %rax, %rdi\n"
	"	call cn_out\n"
	"	pop %r12\n"
	"	pop %rbx\n"
	"	ret\n"
	"cn_dbl:\n"
	"	lea (%rdi,%rdi), %rax\n"
	"	adc $0, %rax\n"
	"	ret\n"
	"cn_f_end:\n"
	"cn_out:\n"
	"	lea 1(%rdi), %rax\n"
	"	ret\n"
	".data\n"
	"cn_tbl: .quad cn_t0, cn_t1\n"
	".text\n");

/* A REP in the middle (counted by its twin: twin_rep.c), then a loop. */
extern uint8_t cn_rep[], cn_rep_end[];
__asm__(
	".text\n"
	".globl cn_rep, cn_rep_end\n"
	"cn_rep:\n"
	"	mov %rdi, %rdx\n"
	"	cld\n"
	"	lea cn_buf(%rip), %rdi\n"
	"	mov $0x5a, %eax\n"
	"	mov %rdx, %rcx\n"
	"	rep stosb\n"
	"	movzbl cn_buf(%rip), %eax\n"
	"1:	add %rdx, %rax\n"
	"	dec %rdx\n"
	"	jnz 1b\n"
	"	ret\n"
	"cn_rep_end:\n"
	".data\n"
	"cn_buf: .fill 64, 1, 0\n"
	".text\n");

/* The REP string kinds a twin counts (jit/twin_rep.c): rep stosb with rcx
 * n & 3 (0: one instruction, no access), repe cmpsb ending at the first
 * difference (rcx left: 7) or running out (0), repne scasb ending on its
 * match (rcx 5), rep movsq of (n & 1) * 2 quadwords.  Returns a value of n
 * only (its buffers set at each call). */
extern uint8_t cn_reps[], cn_reps_end[];
__asm__(
	".text\n"
	".globl cn_reps, cn_reps_end\n"
	"cn_reps:\n"
	"	push %rbx\n"
	"	mov %rdi, %rbx\n"
	"	cld\n"
	"	movq $0, cr_a(%rip)\n"
	"	movq $0, cr_a+8(%rip)\n"
	"	lea cr_a(%rip), %rdi\n"
	"	mov %rbx, %rcx\n"
	"	and $3, %ecx\n"
	"	mov $0x41, %eax\n"
	"	rep stosb\n"
	"	lea cr_a(%rip), %rsi\n"
	"	lea cr_b(%rip), %rdi\n"
	"	mov $8, %ecx\n"
	"	repe cmpsb\n"
	"	mov %rcx, %rdx\n"
	"	lea cr_b(%rip), %rdi\n"
	"	mov $16, %ecx\n"
	"	mov $0x41, %eax\n"
	"	repne scasb\n"
	"	lea (%rdx,%rcx,4), %rdx\n"
	"	lea cr_a(%rip), %rsi\n"
	"	lea cr_c(%rip), %rdi\n"
	"	mov %rbx, %rcx\n"
	"	and $1, %ecx\n"
	"	add %rcx, %rcx\n"
	"	rep movsq\n"
	"	lea cr_b(%rip), %rsi\n"
	"	mov %rbx, %rcx\n"
	"	and $1, %ecx\n"
	"	rep lodsb\n"
	"	mov cr_c(%rip), %rax\n"
	"	lea (%rax,%rdx,8), %rax\n"
	"	pop %rbx\n"
	"	ret\n"
	"cn_reps_end:\n"
	".data\n"
	"cr_a: .fill 16, 1, 0\n"
	"cr_b: .fill 10, 1, 0\n"
	"	.byte 0x41\n"
	"	.fill 5, 1, 0\n"
	"cr_c: .fill 16, 1, 0\n"
	".text\n");

/* Threads meeting inside the range: each adds one to *rdi and waits
 * (at most rdx rounds) until it holds rsi: 1 when they met.  Under the
 * lock only one thread is ever inside: they could not. */
extern uint8_t cn_meet[], cn_meet_end[];
__asm__(
	".text\n"
	".globl cn_meet, cn_meet_end\n"
	"cn_meet:\n"
	"	lock incq (%rdi)\n"
	"1:	cmp %rsi, (%rdi)\n"
	"	jae 2f\n"
	"	pause\n"
	"	dec %rdx\n"
	"	jnz 1b\n"
	"	xor %eax, %eax\n"
	"	ret\n"
	"2:	mov $1, %eax\n"
	"	ret\n"
	"cn_meet_end:\n");

/* n rounds of a block whose flags are live at its start (the jcc's other
 * side begins with an adc that reads memory) and dead from its second
 * instruction: its twin's adds go there (the units before take back what
 * ran).  Returns a value of n only. */
extern uint8_t cn_mid[], cn_mid_end[];
__asm__(
	".text\n"
	".globl cn_mid, cn_mid_end\n"
	"cn_mid:\n"
	"	xor %eax, %eax\n"
	"	mov %rdi, %rcx\n"
	"	mov %rdi, -8(%rsp)\n"
	"1:	cmp $2, %rcx\n"
	"	jb 2f\n"
	"	adc -8(%rsp), %rax\n"     /* CF read: the flags live here */
	"	mov %rax, -16(%rsp)\n"    /* dead from here: the adds */
	"	add $3, %rax\n"
	"	dec %rcx\n"
	"	jnz 1b\n"
	"2:	lea 1(%rax), %rax\n"
	"	ret\n"
	"cn_mid_end:\n");

static struct gb_jit_mem mem;
static struct gb_jit *jit;

static void teardown(void)
{
	gb_jit__free(jit);
	munmap(mem.code, GB_JIT_SIZE);
}

TestSuite(jit_count, .fini = teardown);

/* A cache with twins over [lo, end), every instruction of it translated
 * (as the patch trap does for a small range), this thread's gs base area
 * 0; shared: a forked child runs in the same cache.  The entry of lo. */
static bool sets_only; /* every head in the form past the block counters */

static uint64_t open_twins(const uint8_t *lo, const uint8_t *end, bool shared)
{
	mem = jit_map_near_as((uint64_t)lo, shared);
	struct gb_jit_opts o = { .nostop = true, .ring_timeout_ms = 200, .twins = true,
				 .twin_sets = sets_only };
	jit = gb_jit__new_opts(&mem, (uint64_t)lo, (uint64_t)end - 1, &o);
	cr_assert_not_null(jit);
	cr_assert_eq(syscall(SYS_arch_prctl, ARCH_SET_GS, gb_jit__tls(jit, 0)), 0);
	uint64_t e = gb_jit__entry(jit, (uint64_t)lo, jit_fetch, NULL);
	cr_assert_neq(e, 0);
	for (const uint8_t *p = lo; p < end;) {
		const struct gb_insn *gi = jit_fetch(NULL, (uint64_t)p);
		cr_assert_not_null(gi);
		cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)p, jit_fetch, NULL), 0);
		p += gi->len;
	}
	int te = gb_jit__twins(jit, jit_fetch, NULL);
	cr_assert_eq(te, 0, "the twin pass: %d", te);
	struct gb_jit_stats st;
	gb_jit__stats(jit, &st);
	cr_assert_gt(st.twins, 0, "no twin made");
	if (sets_only)
		cr_assert_eq(st.twin_heads_own, 0, "a head with its own counter");
	else
		cr_assert_eq(st.twin_heads_own, st.twin_heads, "%lu of %lu heads with their own counter",
			     (unsigned long)st.twin_heads_own, (unsigned long)st.twin_heads);
	return e;
}

/* The counts of the ring's records (the lines they make). */
static struct gb_jit_counts ring_counts(void)
{
	struct gb_jit_counts c = { 0 };
	size_t pos = 0;
	struct gb_jit_rec rec;
	int r;
	while ((r = gb_jit__ring_next(jit, &pos, 0, 0, &rec)) == 1) {
		if (rec.kind == GB_JIT_REC_MARK)
			continue;
		c.insns++;
		for (int k = 0; k < rec.nacc; k++)
			*(rec.acc[k].write ? &c.writes : &c.reads) += 1;
	}
	cr_assert_eq(r, 0, "the ring holds garbage");
	return c;
}

static void add(struct gb_jit_counts *a, const struct gb_jit_counts *b)
{
	a->insns += b->insns;
	a->reads += b->reads;
	a->writes += b->writes;
}

static void same_k(const struct gb_jit_counts *a, const struct gb_jit_counts *b, const char *what,
		   int k)
{
	cr_assert(a->insns == b->insns && a->reads == b->reads && a->writes == b->writes,
		  "%s %d: %ld/%ld/%ld instructions/reads/writes, want %ld/%ld/%ld", what, k, (long)a->insns,
		  (long)a->reads, (long)a->writes, (long)b->insns, (long)b->reads, (long)b->writes);
}

static void same(const struct gb_jit_counts *a, const struct gb_jit_counts *b, const char *what)
{
	same_k(a, b, what, 0);
}

typedef long (*fn1_t)(long);

/* One run of fn through entry e (recording, or counting): its result and
 * what it counted (the area's counts and the ring's records). */
static long run(uint64_t e, long arg, bool counting, struct gb_jit_counts *got)
{
	struct gb_jit_counts area;
	gb_jit__counting(jit, counting);
	gb_jit__ring_reset(jit);
	gb_jit__count_take(jit, 0, &area);
	long r = ((fn1_t)e)(arg);
	gb_jit__count_take(jit, 0, &area);
	*got = ring_counts();
	add(got, &area);
	cr_assert_eq(gb_jit__lock_word(jit), 0, "the lock left held");
	return r;
}

static void native_and_records(void)
{
	uint64_t e = open_twins(cn_f, cn_f_end, false);
	long want = ((fn1_t)cn_f)(7);
	struct gb_jit_counts rec, cnt;
	cr_assert_eq(run(e, 7, false, &rec), want, "recording: not the native result");
	cr_assert_gt(rec.insns, 100);
	cr_assert_eq(run(e, 7, true, &cnt), want, "counting: not the native result");
	same(&cnt, &rec, "counting vs the records");
	cr_assert_eq(gb_jit__ring_used(jit), 0, "counting wrote records (%zu words)",
		     gb_jit__ring_used(jit));
	/* and again (the area's counts are differences: no reset needed) */
	cr_assert_eq(run(e, 4, true, &cnt), ((fn1_t)cn_f)(4));
	cr_assert_eq(run(e, 4, false, &rec), ((fn1_t)cn_f)(4));
	same(&cnt, &rec, "a second counting run");
}

Test(jit_count, twins_give_the_native_result_and_the_records_counts)
{
	native_and_records();
}

/* A flush (the code region full) forgets the twins whose counts the block
 * counters weigh: what they counted stays in the thread's counts, and the
 * counters go to the twins made after it (here translated in the other
 * order: each counter weighs another block). */
Test(jit_count, a_flush_keeps_what_the_block_counters_counted)
{
	uint64_t e = open_twins(cn_f, cn_f_end, false);
	long want = ((fn1_t)cn_f)(7);
	struct gb_jit_counts rec, cnt;
	cr_assert_eq(run(e, 7, false, &rec), want);
	gb_jit__counting(jit, true);
	gb_jit__count_take(jit, 0, &cnt);
	cr_assert_eq(((fn1_t)e)(7), want);
	gb_jit__flush(jit);
	uint64_t pcs[256];
	size_t n = 0;
	for (const uint8_t *p = cn_f; p < cn_f_end && n < 256; p += jit_fetch(NULL, (uint64_t)p)->len)
		pcs[n++] = (uint64_t)p;
	while (n-- > 0)
		cr_assert_eq(gb_jit__translate_from(jit, pcs[n], jit_fetch, NULL), 0);
	uint64_t e2 = gb_jit__entry(jit, (uint64_t)cn_f, jit_fetch, NULL);
	cr_assert_neq(e2, 0);
	cr_assert_eq(gb_jit__twins(jit, jit_fetch, NULL), 0);
	cr_assert_eq(((fn1_t)e2)(7), want);
	gb_jit__count_take(jit, 0, &cnt);
	add(&rec, &rec);
	same(&cnt, &rec, "one run before a flush and one after, taken together");
}

/* (the twins made after the block counters are all given out) */
Test(jit_count, twins_adding_the_counts_themselves_give_the_records_counts)
{
	sets_only = true;
	native_and_records();
}

Test(jit_count, a_rep_is_counted_by_its_twin)
{
	uint64_t e = open_twins(cn_rep, cn_rep_end, false);
	for (long n = 1; n < 7; n += 5) {
		long want = ((fn1_t)cn_rep)(n);
		struct gb_jit_counts rec, cnt;
		cr_assert_eq(run(e, n, false, &rec), want);
		cr_assert_eq(run(e, n, true, &cnt), want);
		same(&cnt, &rec, "counting with a REP");
		cr_assert_eq(gb_jit__ring_used(jit), 0, "the REP recorded (%zu words)",
			     gb_jit__ring_used(jit));
	}
	cr_assert_neq(gb_jit__twin(jit, (uint64_t)cn_rep + 3 + 1 + 7 + 5 + 3), 0,
		      "the REP has no twin");
}

/* Each REP kind, rcx 0 and not, conditional ones ending early or not */
Test(jit_count, every_rep_kind_counts_as_its_records)
{
	uint64_t e = open_twins(cn_reps, cn_reps_end, false);
	for (long n = 0; n < 8; n++) {
		long want = ((fn1_t)cn_reps)(n);
		struct gb_jit_counts rec, cnt;
		cr_assert_eq(run(e, n, false, &rec), want, "n %ld: recording: not the native result", n);
		cr_assert_eq(run(e, n, true, &cnt), want, "n %ld: counting: not the native result", n);
		same_k(&cnt, &rec, "counting the REP kinds, n", (int)n);
		cr_assert_eq(gb_jit__ring_used(jit), 0, "n %ld: recorded", n);
	}
}

/* Flags through a twin: a head whose flags are live (adc first) keeps
 * the caller's CF; one whose flags are dead may not matter. */
extern uint8_t cn_fl[], cn_fl_end[];
__asm__(
	".text\n"
	".globl cn_fl, cn_fl_end\n"
	"cn_fl:\n"
	"	adc $0, %rdi\n"
	"	lea (%rdi,%rdi), %rax\n"
	"	ret\n"
	"cn_fl_end:\n");

Test(jit_count, the_callers_flags_reach_a_twin)
{
	uint64_t e = open_twins(cn_fl, cn_fl_end, false);
	gb_jit__counting(jit, true);
	long r;
	__asm__ volatile("stc\n\tmov $20, %%edi\n\tcall *%[e]" : "=a"(r) : [e] "r"(e)
			 : "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "memory", "cc");
	cr_assert_eq(r, 42, "CF lost: %ld", r);
	struct gb_jit_counts c;
	gb_jit__count_take(jit, 0, &c);
	cr_assert_eq(c.insns, 3);
	cr_assert_eq(c.reads, 1, "the ret's read");
}

struct worker { uint64_t e; unsigned k; long n, calls, sum; uint64_t *meet; uint64_t em; long met; };

static void *work(void *arg)
{
	struct worker *w = arg;
	if (syscall(SYS_arch_prctl, ARCH_SET_GS, gb_jit__tls(jit, w->k)))
		return (void *)1;
	w->met = ((long (*)(uint64_t *, long, long))w->em)(w->meet, 4, 2000000000L);
	for (long c = 0; c < w->calls; c++)
		w->sum += ((fn1_t)w->e)(w->n);
	return NULL;
}

Test(jit_count, threads_run_their_twins_at_once_each_counting_its_own)
{
	uint64_t e = open_twins(cn_f, cn_meet_end, false);
	uint64_t em = gb_jit__entry(jit, (uint64_t)cn_meet, jit_fetch, NULL);
	cr_assert_neq(em, 0);
	cr_assert_eq(gb_jit__twins(jit, jit_fetch, NULL), 0);
	struct gb_jit_counts one;
	run(e, 5, false, &one); /* a call's counts, from its records */
	enum { T = 4, CALLS = 2000 };
	struct worker w[T];
	pthread_t th[T];
	uint64_t meet = 0;
	struct gb_jit_counts base;
	for (unsigned k = 0; k < T; k++)
		gb_jit__count_take(jit, k + 1, &base);
	gb_jit__counting(jit, true);
	gb_jit__ring_reset(jit);
	for (unsigned k = 0; k < T; k++) {
		w[k] = (struct worker){ e, k + 1, 5, CALLS, 0, &meet, em, 0 };
		cr_assert_eq(pthread_create(&th[k], NULL, work, &w[k]), 0);
	}
	for (unsigned k = 0; k < T; k++) {
		void *r;
		pthread_join(th[k], &r);
		cr_assert_null(r);
		cr_assert_eq(w[k].met, 1, "thread %u: the %u threads were never inside at once", k, T);
		cr_assert_eq(w[k].sum, CALLS * ((fn1_t)cn_f)(5));
		struct gb_jit_counts c;
		gb_jit__count_take(jit, k + 1, &c);
		/* the meeting's own counts vary (its wait): the calls' do not */
		cr_assert_geq(c.insns, CALLS * one.insns + 4);
		cr_assert_eq(c.writes, CALLS * one.writes + 1, "thread %u: writes", k); /* (+ lock inc) */
	}
	cr_assert_eq(gb_jit__ring_used(jit), 0, "records written");
	cr_assert_eq(gb_jit__lock_word(jit), 0, "the lock taken");
}

/* --- a child stopped at every step of its twins --- */

static uint64_t cn_entry, cn_lo, cn_hi;
static long (*cn_fn)(long) = (long (*)(long))(uintptr_t)cn_f;
static long cn_arg = 3;

static __attribute__((noreturn)) void child(uint64_t e)
{
	long want = cn_fn(cn_arg);
	ptrace(PTRACE_TRACEME, 0, NULL, NULL);
	raise(SIGSTOP);
	long got;
	uint64_t rbx_in = 0x1234567890abcdefull, rbx_out;
	__asm__ volatile("mov %[in], %%rbx\n\t"
			 "mov %[a], %%rdi\n\t"
			 "lea -128(%%rsp), %%rsp\n\t"
			 "call *%[e]\n\t"
			 "lea 128(%%rsp), %%rsp\n\t"
			 "mov %%rbx, %[out]"
			 : "=a"(got), [out] "=&r"(rbx_out)
			 : [e] "r"(e), [in] "r"(rbx_in), [a] "r"(cn_arg)
			 : "rbx", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "memory", "cc");
	_exit(got == want && rbx_out == rbx_in ? 0 : 3);
}

/* Run a child (counting) to its k-th step in the cache, unwind it, send it
 * back in through the entry of where it stands (as after a signal handler)
 * and let it finish: its counts.  false once it left before k steps. */
static bool run_to(int k, struct gb_jit_counts *got, bool *in_twin)
{
	struct gb_jit_counts area;
	gb_jit__counting(jit, true);
	gb_jit__ring_reset(jit);
	gb_jit__count_take(jit, 0, &area);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		child(cn_entry);
	int st, n = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_EXITKILL);
	bool was_in = false, left = false;
	struct user_regs_struct r;
	for (;;) {
		cr_assert_eq(ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL), 0);
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		cr_assert(WIFSTOPPED(st), "step %d: status %#x", n, st);
		ptrace(PTRACE_GETREGS, pid, NULL, &r);
		bool in = gb_jit__in_code(jit, r.rip);
		was_in |= in;
		if (was_in && !in) {
			left = true;
			break;
		}
		if (in && ++n == k)
			break;
	}
	if (!left) {
		struct gb_jit_loc loc;
		uint64_t rip = r.rip;
		cr_assert_eq(gb_jit__locate(jit, rip, &loc), 0);
		*in_twin = loc.twin;
		struct gb_jit_unwound uo;
		cr_assert_eq(gb_jit__unwind(jit, &r, NULL, &uo), 0, "step %d: +%#lx", k, rip - mem.code_addr);
		cr_assert(!gb_jit__in_code(jit, r.rip), "step %d: unwound into the cache", k);
		cr_assert_eq(gb_jit__lock_word(jit), 0, "step %d (+%#lx): the lock held", k,
			     rip - mem.code_addr);
		if (r.rip >= cn_lo && r.rip < cn_hi) {
			uint64_t blk = gb_jit__entry(jit, r.rip, jit_fetch, NULL);
			cr_assert_neq(blk, 0, "step %d: no entry at %#llx", k, r.rip);
			cr_assert_eq(gb_jit__twins(jit, jit_fetch, NULL), 0);
			r.rip = blk;
		}
		ptrace(PTRACE_SETREGS, pid, NULL, &r);
	}
	cr_assert_eq(ptrace(PTRACE_CONT, pid, NULL, NULL), 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "step %d: not the native result (%#x)", k, st);
	gb_jit__count_take(jit, 0, &area);
	*got = ring_counts();
	add(got, &area);
	return !left;
}

/* Every k until the child leaves the cache: the counts of one
 * uninterrupted run (the recording blocks' records of it). */
static void every_step(const uint8_t *lo, const uint8_t *end, long (*fn)(long), long arg,
		       int min_twin)
{
	cn_fn = fn;
	cn_arg = arg;
	cn_lo = (uint64_t)lo;
	cn_hi = (uint64_t)end;
	cn_entry = open_twins(lo, end, true);
	struct gb_jit_counts want, got;
	cr_assert_eq(run(cn_entry, arg, false, &want), fn(arg));
	int k = 1, twins = 0;
	bool in_twin = false;
	for (; run_to(k, &got, &in_twin); k++) {
		same_k(&got, &want, "stopped and unwound at step", k);
		twins += in_twin;
	}
	cr_assert_gt(twins, min_twin, "%d of %d stops in a twin", twins, k);
}

Test(jit_count, stopped_at_every_step_of_a_twin_the_counts_are_one_runs)
{
	every_step(cn_f, cn_f_end, (long (*)(long))(uintptr_t)cn_f, 3, 150);
}

Test(jit_count, a_head_where_the_flags_are_dead_counts_as_at_the_start)
{
	uint64_t e = open_twins(cn_mid, cn_mid_end, false);
	struct gb_jit_stats st;
	gb_jit__stats(jit, &st);
	cr_assert_gt(st.twin_heads_moved, 0, "no head moved (%lu of %lu heads with the flags live)",
		     (unsigned long)st.twin_heads_live, (unsigned long)st.twin_heads);
	for (long n = 1; n < 9; n += 3) {
		long want = ((fn1_t)cn_mid)(n);
		struct gb_jit_counts rec, cnt;
		cr_assert_eq(run(e, n, false, &rec), want, "recording: not the native result");
		cr_assert_eq(run(e, n, true, &cnt), want, "counting: not the native result");
		same(&cnt, &rec, "counting with a head inside the block");
	}
}

Test(jit_count, stopped_at_every_step_around_a_head_inside_the_block_the_counts_are_one_runs)
{
	every_step(cn_mid, cn_mid_end, (long (*)(long))(uintptr_t)cn_mid, 4, 10);
}

/* The same two with every head adding the counts themselves (the form
 * past the block counters: three adds, or eleven flag-free instructions) */
Test(jit_count, stopped_at_every_step_of_a_twin_adding_the_counts_the_counts_are_one_runs)
{
	sets_only = true;
	every_step(cn_f, cn_f_end, (long (*)(long))(uintptr_t)cn_f, 3, 150);
}

Test(jit_count, stopped_at_every_step_around_a_head_adding_the_counts_inside_the_block_the_counts_are_one_runs)
{
	sets_only = true;
	every_step(cn_mid, cn_mid_end, (long (*)(long))(uintptr_t)cn_mid, 4, 10);
}

Test(jit_count, stopped_at_every_step_with_a_rep_the_counts_are_one_runs)
{
	every_step(cn_rep, cn_rep_end, (long (*)(long))(uintptr_t)cn_rep, 4, 10);
}

/* In and around each REP kind's pieces, and between its iterations (a
 * single step stops after each) */
Test(jit_count, stopped_at_every_step_of_the_rep_kinds_the_counts_are_one_runs)
{
	for (long n = 0; n < 4; n++) {
		every_step(cn_reps, cn_reps_end, (long (*)(long))(uintptr_t)cn_reps, n, 20);
		teardown();
	}
	jit = NULL;
	mem.code = NULL;
}

/* A block whose first instruction no twin counts (popf: the recording
 * block checks that it does not set TF), reached from a twin. */
extern uint8_t cn_popf[], cn_popf_end[];
__asm__(
	".text\n"
	".globl cn_popf, cn_popf_end\n"
	"cn_popf:\n"
	"	lea 3(%rdi), %rax\n"
	"	pushf\n"
	"	popf\n"
	"	lea (%rax,%rax,2), %rax\n"
	"	ret\n"
	"cn_popf_end:\n");

/* Harmless without gebpf (docs/trace.md): a twin's to-recording entry (the
 * popf of cn_popf) whose lock a dead gebpf holds gives its ticket up and
 * runs the instruction natively from its copy, then the twins again: the
 * native result, never a wait. */
Test(jit_count, gebpf_gone_a_to_recording_entry_goes_on_natively)
{
	uint64_t e = open_twins(cn_popf, cn_popf_end, false);
	long want = ((fn1_t)cn_popf)(9);
	gb_jit__counting(jit, true);
	cr_assert_eq(gb_jit__lock_try(jit), 1, "this process holds the lock, as a gebpf that died");
	gb_jit__live_end(jit);
	struct gb_jit_counts c;
	gb_jit__count_take(jit, 0, &c);
	cr_assert_eq(((fn1_t)e)(9), want);
	cr_assert_eq(gb_jit__ring_used(jit), 0, "it recorded");
	cr_assert_eq(gb_jit__lock_word(jit), 2, "its ticket given up (ours and its, not yet passed on)");
}
