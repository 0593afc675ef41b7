/* The translator's stop-free mode (user/jit: lock.c, ibl.c), run in this
 * process: functions translated into a cache mapped here, entered through
 * their entry blocks (which take the cache's lock word), leaving by jumps
 * and table lookups, never a stop.  Each thread sets its gs base to its
 * own area of the cache first, as gebpf does for every thread of a target. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "decode/decode.h"
#include "jit/jit.h"
#include "jit_util.h"

extern uint8_t jt_sum[], jt_sum_end[];     /* test_jit.c */
extern int64_t jt_total;

/* Calls and jumps of every kind: a direct call into the range, an indirect
 * call into it, an indirect jmp inside it, a direct call out of it (ns_out
 * returns rdi+1 and notes the return address it was given), a ret out. */
extern uint8_t ns_f[], ns_f_end[], ns_tail[], ns_ret_site[], ns_dbl[];
extern uint64_t ns_seen;
__asm__(
	".text\n"
	".globl ns_f, ns_f_end, ns_tail, ns_ret_site, ns_dbl, ns_out\n"
	"ns_f:\n"
	"	push %rbx\n"
	"	mov %rdi, %rbx\n"
	"	call ns_dbl\n"
	"	lea ns_dbl(%rip), %rcx\n"
	"	mov %rax, %rdi\n"
	"	call *%rcx\n"
	"	lea ns_tail(%rip), %rdx\n"
	"	jmp *%rdx\n"
	"ns_tail:\n"
	"	add %rbx, %rax\n"
	"	mov %rax, %rdi\n"
	"	call ns_out\n"
	"ns_ret_site:\n"
	"	pop %rbx\n"
	"	ret\n"
	"	nop; nop; nop\n" /* ns_dbl, a call's target, not in ns_ret_site's 5 bytes */
	"ns_dbl:\n"
	"	lea (%rdi,%rdi), %rax\n"
	"	ret\n"
	"ns_f_end:\n"
	"ns_out:\n"
	"	mov (%rsp), %rcx\n"
	"	mov %rcx, ns_seen(%rip)\n"
	"	lea 1(%rdi), %rax\n"
	"	ret\n"
	".data\n"
	".globl ns_seen\n"
	"ns_seen: .quad 0\n"
	".text\n");

/* Flags through an entry and a ret out: adc takes the caller's CF, the add
 * leaves OF/SF/ZF/CF/PF/AF for the caller. */
extern uint8_t ns_fl[], ns_fl_end[];
__asm__(
	".text\n"
	".globl ns_fl, ns_fl_end\n"
	"ns_fl:\n"
	"	adc $0, %rax\n"
	"	add %rsi, %rdi\n"
	"	ret\n"
	"ns_fl_end:\n");

/* n times: a non-atomic increment of a shared counter (lost updates if two
 * threads were inside at once) and of the caller's own word. */
extern uint8_t ns_acc[], ns_acc_end[];
extern uint64_t ns_shared;
__asm__(
	".text\n"
	".globl ns_acc, ns_acc_end\n"
	"ns_acc:\n"
	"	mov %rsi, %rcx\n"
	"1:	mov ns_shared(%rip), %rax\n"
	"	inc %rax\n"
	"	mov %rax, ns_shared(%rip)\n"
	"	incq (%rdi)\n"
	"	dec %rcx\n"
	"	jnz 1b\n"
	"	ret\n"
	"ns_acc_end:\n"
	".data\n"
	".globl ns_shared\n"
	"ns_shared: .quad 0\n"
	".text\n");

static struct gb_jit_mem mem;
static struct gb_jit *jit;

/* The writer waits 200 ms for the ring's consumer (open_range_wait: ms). */
static void open_range_wait(const uint8_t *lo, const uint8_t *end, uint32_t ms)
{
	mem = jit_map_near((uint64_t)lo);
	jit = jit_open_nostop(&mem, lo, end, ms);
}

static void open_range(const uint8_t *lo, const uint8_t *end) { open_range_wait(lo, end, 200); }

static void teardown(void)
{
	gb_jit__free(jit);
	munmap(mem.code, GB_JIT_SIZE);
}

TestSuite(jit_nostop, .fini = teardown);

typedef long (*fn1_t)(long);

static size_t records(uint64_t *pcs, size_t max, struct gb_jit_rec *keep, uint64_t keep_pc)
{
	size_t pos = 0, n = 0;
	struct gb_jit_rec rec;
	int r;
	while ((r = gb_jit__ring_next(jit, &pos, 0, 0, &rec)) == 1) {
		if (rec.kind == GB_JIT_REC_MARK)
			continue; /* stretch markers: the tests of markers look at them */
		if (n < max)
			pcs[n] = rec.pc;
		if (keep && rec.pc == keep_pc)
			*keep++ = rec;
		n++;
	}
	cr_assert_eq(r, 0, "the ring holds garbage");
	return n;
}

Test(jit_nostop, a_loop_with_a_ret_out_runs_without_a_stop)
{
	open_range(jt_sum, jt_sum_end);
	uint64_t e = gb_jit__entry(jit, (uint64_t)jt_sum, jit_fetch, NULL);
	cr_assert_neq(e, 0);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)jt_sum, jit_fetch, NULL), 0);
	gb_jit__ring_reset(jit);
	long n = 100;
	cr_assert_eq(((fn1_t)e)(n), 5 * n);
	cr_assert_eq(jt_total, 5 * n);
	uint64_t pcs[1024];
	size_t npc = records(pcs, 1024, NULL, 0);
	cr_assert_eq(npc, 3 + 7 * (size_t)n + 2, "every instruction recorded, once");
	cr_assert_eq(pcs[0], (uint64_t)jt_sum);
	cr_assert_eq(pcs[npc - 1], (uint64_t)jt_sum_end - 1, "the ret last");
	cr_assert_eq(gb_jit__lock_word(jit), 0, "the lock released at the exit");
}

/* The 15 records of ns_f up to its call out, in order. */
static void check_ns_f(const uint64_t *pcs, size_t n)
{
	const uint64_t f = (uint64_t)ns_f, d = (uint64_t)ns_dbl, t = (uint64_t)ns_tail;
	const uint64_t want[] = { f, f + 1, f + 4, d, d + 4, f + 9, f + 16, f + 19, d, d + 4,
				  f + 21, f + 28, t, t + 3, t + 6 };
	for (size_t k = 0; k < n; k++)
		cr_assert_eq(pcs[k], want[k], "record %zu: %#lx, want %#lx", k, pcs[k], want[k]);
}

Test(jit_nostop, calls_push_original_return_addresses_and_lookups_find_blocks)
{
	open_range(ns_f, ns_f_end);
	uint64_t e = gb_jit__entry(jit, (uint64_t)ns_f, jit_fetch, NULL);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)ns_f, jit_fetch, NULL), 0);
	/* ns_tail is reached only by the indirect jmp: translated as gebpf
	 * would at the lookup's miss stop */
	cr_assert_neq(gb_jit__block(jit, (uint64_t)ns_tail, jit_fetch, NULL), 0);
	gb_jit__ring_reset(jit);
	ns_seen = 0;
	cr_assert_eq(((fn1_t)e)(7), 5 * 7 + 1, "native result");
	cr_assert_eq(ns_seen, (uint64_t)ns_ret_site, "the callee out of the range sees the original "
		     "return address");
	uint64_t pcs[64];
	struct gb_jit_rec calls[4], push;
	memset(calls, 0, sizeof(calls));
	/* the range is left at the call out (its return site is an entry the
	 * trap patches: the patch test goes on from there) */
	size_t n = records(pcs, 64, calls, (uint64_t)ns_f + 4);
	cr_assert_eq(n, 15);
	check_ns_f(pcs, n);
	records(pcs, 64, &push, (uint64_t)ns_f);
	cr_assert_eq(calls[0].nacc, 1);
	cr_assert(calls[0].acc[0].write && calls[0].acc[0].size == 8, "the call's push: one write");
	cr_assert_eq(calls[0].acc[0].addr, push.acc[0].addr - 8, "at the decremented rsp");
	cr_assert_eq(gb_jit__lock_word(jit), 0);
	struct gb_jit_stats st;
	gb_jit__stats(jit, &st);
	cr_assert_eq(st.entries, 1);
}

Test(jit_nostop, a_lookup_missing_inside_the_range_leaves_for_the_original_code)
{
	open_range(ns_f, ns_f_end);
	uint64_t e = gb_jit__entry(jit, (uint64_t)ns_f, jit_fetch, NULL);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)ns_f, jit_fetch, NULL), 0);
	gb_jit__ring_reset(jit);
	cr_assert_eq(((fn1_t)e)(3), 5 * 3 + 1);
	uint64_t pcs[64];
	size_t n = records(pcs, 64, NULL, 0);
	cr_assert_eq(n, 12, "records up to the indirect jmp whose target was not translated");
	check_ns_f(pcs, n);
	cr_assert_eq(gb_jit__lock_word(jit), 0);
	/* the miss's stop is known to locate, with where gebpf resumes it */
	struct gb_jit_loc loc;
	size_t misses = 0;
	for (uint64_t a = mem.code_addr; gb_jit__in_code(jit, a); a++) {
		cr_assert_eq(gb_jit__locate(jit, a, &loc), 0, "+%#lx maps to nothing", a - mem.code_addr);
		if (loc.lookup_miss) {
			misses++;
			cr_assert(gb_jit__in_code(jit, loc.retry));
		}
	}
	cr_assert_eq(misses, 3, "one per lookup (ns_dbl's ret, the call, the jmp)");
}

static uint64_t call_flags(uint64_t fn, uint64_t a, uint64_t b, uint64_t *rax)
{
	uint64_t fl, r = 0;
	/* below the red zone; stc before the call, the flags read right after */
	__asm__ volatile("lea -128(%%rsp), %%rsp\n\t"
			 "stc\n\t"
			 "call *%[fn]\n\t"
			 "pushfq\n\t"
			 "pop %[fl]\n\t"
			 "lea 128(%%rsp), %%rsp"
			 : [fl] "=&r"(fl), "+a"(r), "+D"(a), "+S"(b)
			 : [fn] "r"(fn)
			 : "rcx", "rdx", "r8", "r9", "r10", "r11", "memory", "cc");
	*rax = r;
	return fl & 0x8d5; /* OF SF ZF AF PF CF */
}

Test(jit_nostop, flags_survive_the_entry_and_the_lookup)
{
	open_range(ns_fl, ns_fl_end);
	uint64_t e = gb_jit__entry(jit, (uint64_t)ns_fl, jit_fetch, NULL);
	cr_assert_neq(e, 0);
	const uint64_t in[][2] = { { 1, 2 }, { INT64_MAX, 1 }, { (uint64_t)-1, 1 }, { 0, 0 },
				   { 0x8000000000000000ull, 0x8000000000000000ull }, { 0xf, 1 } };
	for (size_t k = 0; k < sizeof(in) / sizeof(in[0]); k++) {
		uint64_t ra, rb;
		uint64_t fa = call_flags((uint64_t)ns_fl, in[k][0], in[k][1], &ra);
		uint64_t fb = call_flags(e, in[k][0], in[k][1], &rb);
		cr_assert_eq(rb, ra, "case %zu: adc saw the caller's CF", k);
		cr_assert_eq(fb, fa, "case %zu: flags %#lx, native %#lx", k, fb, fa);
	}
}

/* A jump table (jmp through memory, indexed) and a call through a
 * RIP-relative pointer, both to code of the range. */
extern uint8_t ns_sw[], ns_sw_end[], ns_c0[], ns_c1[];
extern uint64_t ns_swt[2];
__asm__(
	".text\n"
	".globl ns_sw, ns_sw_end, ns_c0, ns_c1\n"
	"ns_sw:\n"
	"	lea ns_swt(%rip), %rax\n"
	"	jmp *(%rax,%rdi,8)\n"
	"ns_c0:\n"
	"	mov $10, %eax\n"
	"	ret\n"
	"ns_c1:\n"
	"	call *ns_fp(%rip)\n"
	"	inc %eax\n"
	"	ret\n"
	"ns_sw_end:\n"
	".data\n"
	".globl ns_swt\n"
	"ns_swt: .quad ns_c0, ns_c1\n"
	"ns_fp: .quad ns_c0\n"
	".text\n");

/* read(rdi, rsi, rdx) made inside the range */
extern uint8_t ns_sys[], ns_sys_end[];
__asm__(
	".text\n"
	".globl ns_sys, ns_sys_end\n"
	"ns_sys:\n"
	"	mov $0, %eax\n"
	"	syscall\n"
	"	ret\n"
	"ns_sys_end:\n");

Test(jit_nostop, jumps_and_calls_through_memory_find_their_blocks)
{
	open_range(ns_sw, ns_sw_end);
	uint64_t e = gb_jit__entry(jit, (uint64_t)ns_sw, jit_fetch, NULL);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)ns_sw, jit_fetch, NULL), 0);
	/* reached only through memory: translated as gebpf would at the misses */
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)ns_c0, jit_fetch, NULL), 0);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)ns_c1, jit_fetch, NULL), 0);
	for (long k = 0; k < 2; k++) {
		gb_jit__ring_reset(jit);
		cr_assert_eq(((fn1_t)e)(k), 10 + k);
		uint64_t pcs[16];
		struct gb_jit_rec jmp;
		size_t n = records(pcs, 16, &jmp, (uint64_t)ns_sw + 7);
		cr_assert_eq(n, k ? 7 : 4, "case %ld: %zu records", k, n);
		cr_assert_eq(jmp.nacc, 1);
		cr_assert_eq(jmp.acc[0].addr, (uint64_t)&ns_swt[k], "the jmp reads its table entry");
		cr_assert_eq(pcs[2], k ? (uint64_t)ns_c1 : (uint64_t)ns_c0);
		if (k) /* call, ns_c0's mov and ret, inc, ret */
			cr_assert_eq(pcs[3], (uint64_t)ns_c0);
	}
	cr_assert_eq(gb_jit__lock_word(jit), 0);
}

/* --- the lock --- */

struct worker { uint64_t entry; unsigned k; uint64_t word; int calls; long n; };

static void *work(void *arg)
{
	struct worker *w = arg;
	if (syscall(SYS_arch_prctl, ARCH_SET_GS, gb_jit__tls(jit, w->k)))
		return (void *)1;
	for (int c = 0; c < w->calls; c++)
		((void (*)(uint64_t *, long))w->entry)(&w->word, w->n);
	return NULL;
}

Test(jit_nostop, sixteen_threads_entering_together_never_interleave)
{
	open_range(ns_acc, ns_acc_end);
	uint64_t e = gb_jit__entry(jit, (uint64_t)ns_acc, jit_fetch, NULL);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)ns_acc, jit_fetch, NULL), 0);
	gb_jit__ring_reset(jit);
	enum { T = 16, CALLS = 300, N = 4 };
	struct worker w[T];
	pthread_t th[T];
	ns_shared = 0;
	for (unsigned k = 0; k < T; k++) {
		w[k] = (struct worker){ e, k + 1, 0, CALLS, N };
		cr_assert_eq(pthread_create(&th[k], NULL, work, &w[k]), 0);
	}
	for (unsigned k = 0; k < T; k++) {
		void *r;
		pthread_join(th[k], &r);
		cr_assert_null(r);
		cr_assert_eq(w[k].word, (uint64_t)CALLS * N);
	}
	cr_assert_eq(ns_shared, (uint64_t)T * CALLS * N, "no update lost: one thread inside at a time");
	cr_assert_eq(gb_jit__lock_word(jit), 0);
	/* The ring: T*CALLS stretches of 2 + 6N records, each touching one
	 * thread's word only. */
	size_t pos = 0, stretches = 0, in_stretch = 0;
	unsigned area = 0;
	struct gb_jit_rec rec;
	while (gb_jit__ring_next(jit, &pos, 0, 0, &rec) == 1) {
		if (rec.kind == GB_JIT_REC_MARK) {
			cr_assert_eq(in_stretch, 0, "a marker inside stretch %zu", stretches);
			cr_assert(rec.area >= 1 && rec.area <= T, "area %u", rec.area);
			area = rec.area;
			continue;
		}
		cr_assert_neq(area, 0, "stretch %zu without its marker", stretches);
		if (in_stretch == 0)
			cr_assert_eq(rec.pc, (uint64_t)ns_acc, "a stretch starts at the entry");
		in_stretch++;
		if (rec.pc == (uint64_t)ns_acc + 0x14) { /* incq (%rdi) */
			cr_assert_eq(rec.nacc, 2);
			cr_assert_eq(rec.acc[0].addr, (uint64_t)&w[area - 1].word,
				     "stretch %zu: not the word of the marker's thread", stretches);
		}
		if (rec.pc == (uint64_t)ns_acc_end - 1) {
			cr_assert_eq(in_stretch, 2 + 6 * N, "stretch %zu: %zu records", stretches, in_stretch);
			stretches++;
			in_stretch = 0;
			area = 0;
		}
	}
	cr_assert_eq(stretches, (size_t)T * CALLS);
	cr_assert_eq(in_stretch, 0);
}

static char task_state(pid_t tid)
{
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	return p && p[1] ? p[2] : '?';
}

struct waiter { uint64_t entry; uint64_t word; pid_t tid; volatile int done; };

static void *wait_entry(void *arg)
{
	struct waiter *w = arg;
	w->tid = (pid_t)syscall(SYS_gettid);
	if (syscall(SYS_arch_prctl, ARCH_SET_GS, gb_jit__tls(jit, 9)))
		return (void *)1;
	((void (*)(uint64_t *, long))w->entry)(&w->word, 3);
	w->done = 1;
	return NULL;
}

Test(jit_nostop, a_thread_finding_the_lock_taken_sleeps_in_a_futex)
{
	open_range(ns_acc, ns_acc_end);
	uint64_t e = gb_jit__entry(jit, (uint64_t)ns_acc, jit_fetch, NULL);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)ns_acc, jit_fetch, NULL), 0);
	/* held by a thread that is not there (the data part's word 256, the
	 * lock: docs/trace.md) */
	__atomic_store_n((uint32_t *)(mem.data + 256), 1, __ATOMIC_SEQ_CST);
	cr_assert_eq(gb_jit__lock_word(jit), 1);
	struct waiter w = { e, 0, 0, 0 };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, wait_entry, &w), 0);
	char st = '?';
	for (int k = 0; k < 200 && st != 'S'; k++) {
		usleep(5000);
		st = w.tid ? task_state(w.tid) : '?';
	}
	cr_assert_eq(st, 'S', "the waiter sleeps (state %c), it does not spin", st);
	cr_assert_eq(gb_jit__lock_word(jit), 2, "the waiter marked the lock contended");
	cr_assert_eq(w.done, 0);
	/* released from outside, as the release routine does: 0, then wake one */
	gb_jit__lock_release(jit);
	void *r;
	pthread_join(th, &r);
	cr_assert_null(r);
	cr_assert_eq(w.word, 3);
	cr_assert_eq(gb_jit__lock_word(jit), 0);
}

struct reader { uint64_t entry; int fd; char c; long r; };

static void *read_entry(void *arg)
{
	struct reader *r = arg;
	if (syscall(SYS_arch_prctl, ARCH_SET_GS, gb_jit__tls(jit, 3)))
		return (void *)1;
	r->r = ((long (*)(int, char *, long))r->entry)(r->fd, &r->c, 1);
	return NULL;
}

Test(jit_nostop, a_system_call_in_the_range_is_made_without_the_lock)
{
	open_range(ns_sys, ns_sys_end);
	uint64_t e = gb_jit__entry(jit, (uint64_t)ns_sys, jit_fetch, NULL);
	cr_assert_neq(e, 0);
	gb_jit__ring_reset(jit);
	int blocked[2], ready[2];
	cr_assert_eq(pipe(blocked), 0);
	cr_assert_eq(pipe(ready), 0);
	struct reader a = { e, blocked[0], 0, 0 };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, read_entry, &a), 0);
	usleep(50000); /* a is in its read, inside the range */
	/* this thread enters and leaves while a waits in its system call */
	cr_assert_eq(write(ready[1], "x", 1), 1);
	char c = 0;
	cr_assert_eq(((long (*)(int, char *, long))e)(ready[0], &c, 1), 1);
	cr_assert_eq(c, 'x');
	cr_assert_eq(write(blocked[1], "y", 1), 1);
	void *r;
	pthread_join(th, &r);
	cr_assert_null(r);
	cr_assert_eq(a.r, 1);
	cr_assert_eq(a.c, 'y');
	cr_assert_eq(gb_jit__lock_word(jit), 0);
	/* a's mov and syscall, this thread's three, a's ret */
	uint64_t pcs[8], s = (uint64_t)ns_sys;
	cr_assert_eq(records(pcs, 8, NULL, 0), 6);
	const uint64_t want[] = { s, s + 5, s, s + 5, s + 7, s + 7 };
	for (int k = 0; k < 6; k++)
		cr_assert_eq(pcs[k], want[k], "record %d", k);
}

static volatile sig_atomic_t ticks;
static void on_tick(int sig) { (void)sig; ticks++; }

Test(jit_nostop, signals_delivered_inside_the_cache_leave_it_exact)
{
	/* No tracer: the kernel delivers them where the thread is, in the
	 * cache; the handler's frame goes below the red zone, which the
	 * translated code never uses, and returns into the cache. */
	open_range(jt_sum, jt_sum_end);
	uint64_t e = gb_jit__entry(jit, (uint64_t)jt_sum, jit_fetch, NULL);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)jt_sum, jit_fetch, NULL), 0);
	struct sigaction sa = { .sa_handler = on_tick };
	cr_assert_eq(sigaction(SIGALRM, &sa, NULL), 0);
	struct itimerval it = { { 0, 200 }, { 0, 200 } };
	cr_assert_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
	long n = 20000;
	for (int k = 0; k < 20; k++) {
		gb_jit__ring_reset(jit);
		cr_assert_eq(((fn1_t)e)(n), 5 * n);
		uint64_t pcs[1];
		cr_assert_eq(records(pcs, 1, NULL, 0), 3 + 7 * (size_t)n + 2);
	}
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	cr_assert_gt(ticks, 0, "some signals arrived while it ran");
	cr_assert_eq(gb_jit__lock_word(jit), 0);
}

/* --- the ring drained while the program runs --- */

extern uint8_t jt_loop[];
extern int32_t jt_arr[64];

struct consumer { volatile int done; size_t recs, reads, bad; };

static void *consume(void *arg)
{
	struct consumer *c = arg;
	struct gb_jit_cursor cur = { 0 };
	struct gb_jit_rec rec;
	for (;;) {
		int r;
		size_t got = 0;
		while ((r = gb_jit__ring_poll(jit, &cur, &rec)) == 1) {
			if (rec.kind == GB_JIT_REC_MARK)
				continue;
			if (rec.pc == (uint64_t)jt_loop + 6 &&
			    (rec.nacc != 1 || rec.acc[0].addr != (uint64_t)&jt_arr[c->reads++ % 64]))
				c->bad++;
			c->recs++;
			if (++got % 4096 == 0)
				gb_jit__ring_commit(jit, &cur);
		}
		if (r < 0)
			return (void *)1;
		gb_jit__ring_commit(jit, &cur);
		if (c->done && !got)
			return NULL;
		if (!got)
			gb_jit__ring_wait(jit, 1);
	}
}

Test(jit_nostop, a_consumer_draining_while_it_runs_loses_nothing)
{
	open_range_wait(jt_sum, jt_sum_end, 10000); /* a loaded machine may not run it for a while */
	uint64_t e = gb_jit__entry(jit, (uint64_t)jt_sum, jit_fetch, NULL);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)jt_sum, jit_fetch, NULL), 0);
	gb_jit__ring_reset(jit);
	struct consumer c = { 0 };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, consume, &c), 0);
	long n = 400000; /* ~20 passes of the ring */
	cr_assert_eq(((fn1_t)e)(n), 5 * n);
	c.done = 1;
	void *r;
	pthread_join(th, &r);
	cr_assert_null(r);
	struct gb_jit_ring_state st;
	gb_jit__ring_state(jit, &st);
	cr_assert(!st.dropping);
	cr_assert_eq(st.dropped, 0);
	cr_assert_eq(c.recs, 3 + 7 * (size_t)n + 2, "every record, once, in order");
	cr_assert_eq(c.reads, (size_t)n);
	cr_assert_eq(c.bad, 0);
	cr_assert_gt(st.consumed, (uint64_t)GB_JIT_RING_SIZE / 8, "the ring went round");
}

/* The waker (gb_jit__ring_waker): a consumer asleep for up to 20 s in
 * sigtimedwait is signalled at the writer's wakes (half-way through the
 * ring's room, its end) and drains every record long before that. */
struct waked { volatile int done, ready; size_t recs, wakes; };

static void *consume_on_signal(void *arg)
{
	struct waked *c = arg;
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	if (gb_jit__ring_waker(jit, (pid_t)syscall(SYS_gettid), SIGUSR2))
		return (void *)1;
	c->ready = 1;
	struct gb_jit_cursor cur = { 0 };
	struct gb_jit_rec rec;
	for (;;) {
		int r;
		size_t got = 0;
		while ((r = gb_jit__ring_poll(jit, &cur, &rec)) == 1)
			if (rec.kind == GB_JIT_REC_INSN)
				c->recs++, got++;
		if (r < 0)
			return (void *)2;
		gb_jit__ring_commit(jit, &cur);
		if (c->done && !got)
			return NULL;
		struct timespec ts = { c->done ? 0 : 20, 1000000 };
		if (sigtimedwait(&s, NULL, &ts) == SIGUSR2)
			c->wakes++;
	}
}

Test(jit_nostop, the_waker_signals_the_consumer_as_the_ring_fills)
{
	open_range_wait(jt_sum, jt_sum_end, 30000);
	uint64_t e = gb_jit__entry(jit, (uint64_t)jt_sum, jit_fetch, NULL);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)jt_sum, jit_fetch, NULL), 0);
	gb_jit__ring_reset(jit);
	struct waked c = { 0 };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, consume_on_signal, &c), 0);
	while (!c.ready)
		usleep(1000);
	usleep(20000); /* the consumer asleep */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long n = 400000; /* more than a pass of the ring */
	cr_assert_eq(((fn1_t)e)(n), 5 * n);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	c.done = 1;
	gb_jit__ring_waker_stop(jit); /* (its last wake, then gone) */
	pthread_kill(th, SIGUSR2);
	void *r;
	pthread_join(th, &r);
	cr_assert_null(r);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	struct gb_jit_ring_state st;
	gb_jit__ring_state(jit, &st);
	cr_assert(!st.dropping);
	cr_assert_eq(c.recs, 3 + 7 * (size_t)n + 2, "every record");
	cr_assert_geq(c.wakes, 2, "%zu wakes", c.wakes);
	cr_assert_lt(s, 15.0, "the writer waited %.1f s for a consumer asleep for 20 s", s);
}

Test(jit_nostop, without_a_consumer_it_gives_up_and_counts_what_it_dropped)
{
	open_range(jt_sum, jt_sum_end); /* a 200 ms wait for the consumer */
	uint64_t e = gb_jit__entry(jit, (uint64_t)jt_sum, jit_fetch, NULL);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)jt_sum, jit_fetch, NULL), 0);
	gb_jit__ring_reset(jit);
	long n = 400000;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(((fn1_t)e)(n), 5 * n, "native result");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_assert_geq(s, 0.19, "it waited for the consumer first (%.3f s)", s);
	struct gb_jit_ring_state st;
	gb_jit__ring_state(jit, &st);
	cr_assert(st.dropping);
	size_t pos = 0, kept = 0, reads = 0;
	struct gb_jit_rec rec;
	while (gb_jit__ring_next(jit, &pos, 0, 0, &rec) == 1) {
		if (rec.kind == GB_JIT_REC_MARK)
			continue;
		if (rec.pc == (uint64_t)jt_loop + 6)
			cr_assert_eq(rec.acc[0].addr, (uint64_t)&jt_arr[reads++ % 64]);
		kept++;
	}
	cr_assert_gt(kept, 0);
	/* the pass filled the ring (its blocks are smaller than the largest:
	 * the room left is counted again when the budget runs out) */
	cr_assert_geq(gb_jit__ring_used(jit), gb_jit__ring_words(jit) * 9 / 10,
		      "a pass of %zu words", gb_jit__ring_used(jit));
	cr_assert_gt(st.dropped, 0);
	cr_assert_eq(kept + st.dropped, 3 + 7 * (size_t)n + 2, "kept %zu + dropped %lu", kept,
		     (unsigned long)st.dropped);
	cr_assert_eq(gb_jit__lock_word(jit), 0);
}
