/* The stop-free mode's stretch markers (user/jit: lock.c's acquire, ring.c's
 * consumer), run in this process: every acquisition of the lock writes a
 * marker naming the thread's area before the stretch's records, and the
 * consumer resolves fs-relative accesses with the fs base registered for
 * that area. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "decode/decode.h"
#include "jit/jit.h"
#include "jit_util.h"

/* A __thread variable read and written fs-relative, a system call in the
 * range (the lock released and taken again: a second marker), a read
 * again: returns ns_tv += rdi. */
__thread uint64_t ns_tv;
extern uint8_t mk_f[], mk_f_end[], mk_sys[];
__asm__(
	".text\n"
	".globl mk_f, mk_f_end, mk_sys\n"
	"mk_f:\n"
	"	mov %fs:ns_tv@tpoff, %rax\n"
	"	add %rdi, %rax\n"
	"	mov %rax, %fs:ns_tv@tpoff\n"
	"	mov $39, %eax\n"
	"mk_sys:\n"
	"	syscall\n"
	"	mov %fs:ns_tv@tpoff, %rax\n"
	"	ret\n"
	"mk_f_end:\n");

/* rdi + 1, in three instructions */
extern uint8_t mk_inc[], mk_inc_end[];
__asm__(
	".text\n"
	".globl mk_inc, mk_inc_end\n"
	"mk_inc:\n"
	"	lea 1(%rdi), %rax\n"
	"	nop\n"
	"	ret\n"
	"mk_inc_end:\n");

static struct gb_jit_mem mem;
static struct gb_jit *jit;

static void teardown(void)
{
	gb_jit__free(jit);
	munmap(mem.code, GB_JIT_SIZE);
}

TestSuite(jit_mark, .fini = teardown);

enum { T = 16, CALLS = 200 };

struct worker { uint64_t entry; unsigned k; uint64_t tv_addr, sum; int bad; };

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t fs = 0;
	if (syscall(SYS_arch_prctl, ARCH_SET_GS, gb_jit__tls(jit, w->k)) ||
	    syscall(SYS_arch_prctl, ARCH_GET_FS, &fs))
		return (void *)1;
	gb_jit__area_fs(jit, w->k, fs); /* as gebpf registers each thread's */
	w->tv_addr = (uint64_t)&ns_tv;
	for (int c = 0; c < CALLS; c++) {
		uint64_t r = ((uint64_t (*)(uint64_t))w->entry)(w->k);
		w->bad += r != (uint64_t)(c + 1) * w->k;
	}
	w->sum = ns_tv;
	return NULL;
}

Test(jit_mark, each_stretch_follows_its_threads_marker_and_fs_resolves_per_thread)
{
	mem = jit_map_near((uint64_t)mk_f);
	jit = jit_open_nostop(&mem, mk_f, mk_f_end, 10000);
	uint64_t e = gb_jit__entry(jit, (uint64_t)mk_f, jit_fetch, NULL);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)mk_f, jit_fetch, NULL), 0);
	gb_jit__ring_reset(jit);
	struct worker w[T];
	pthread_t th[T];
	for (unsigned k = 0; k < T; k++) {
		w[k] = (struct worker){ e, k + 1, 0, 0, 0 };
		cr_assert_eq(pthread_create(&th[k], NULL, work, &w[k]), 0);
	}
	for (unsigned k = 0; k < T; k++) {
		void *r;
		pthread_join(th[k], &r);
		cr_assert_null(r);
		cr_assert_eq(w[k].bad, 0, "thread %u: not the native result", k);
		cr_assert_eq(w[k].sum, (uint64_t)CALLS * w[k].k);
	}
	cr_assert_eq(gb_jit__lock_word(jit), 0);
	/* Each call: marker, mov add mov mov syscall; marker, mov ret. */
	struct gb_jit_cursor c = { 0 };
	struct gb_jit_rec rec;
	size_t marks[T + 1] = { 0 }, insns = 0, fs_acc = 0, since = 0;
	unsigned area = GB_JIT_TLS_COUNT;
	int r;
	while ((r = gb_jit__ring_poll(jit, &c, &rec)) == 1) {
		if (rec.kind == GB_JIT_REC_MARK) {
			cr_assert(rec.area >= 1 && rec.area <= T, "marker of area %u", rec.area);
			cr_assert(since == 0 || since == 2 || since == 5, "a marker after %zu records", since);
			marks[rec.area]++;
			area = rec.area;
			since = 0;
			continue;
		}
		cr_assert_neq(area, GB_JIT_TLS_COUNT, "a record before any marker");
		cr_assert_eq(since == 0, rec.pc == (uint64_t)mk_f || rec.pc == (uint64_t)mk_sys + 2,
			     "record %#lx at %zu after a marker", rec.pc, since);
		since++;
		insns++;
		bool tv = rec.pc == (uint64_t)mk_f || rec.pc == (uint64_t)mk_f + 12 ||
			  rec.pc == (uint64_t)mk_sys + 2; /* the ret's is the stack */
		for (int a = 0; a < rec.nacc && tv; a++) {
			cr_assert_eq(rec.acc[a].addr, w[area - 1].tv_addr,
				     "an fs access of area %u's thread resolved at %#lx, its ns_tv is %#lx",
				     area, rec.acc[a].addr, w[area - 1].tv_addr);
			fs_acc++;
		}
	}
	cr_assert_eq(r, 0, "the ring holds garbage");
	for (unsigned k = 1; k <= T; k++)
		cr_assert_eq(marks[k], 2 * (size_t)CALLS, "area %u: %zu markers", k, marks[k]);
	cr_assert_eq(insns, (size_t)T * CALLS * 7);
	cr_assert_eq(fs_acc, (size_t)T * CALLS * 3);
}

struct drain { volatile int done; size_t marks, insns; int err; };

static void *drain(void *arg)
{
	struct drain *d = arg;
	struct gb_jit_cursor c = { 0 };
	struct gb_jit_rec rec;
	for (;;) {
		int r;
		size_t got = 0;
		while ((r = gb_jit__ring_poll(jit, &c, &rec)) == 1) {
			if (rec.kind == GB_JIT_REC_MARK)
				d->marks++;
			else
				d->insns++;
			if (++got % 4096 == 0)
				gb_jit__ring_commit(jit, &c);
		}
		if (r < 0) {
			d->err = r;
			return NULL;
		}
		gb_jit__ring_commit(jit, &c);
		if (d->done && !got)
			return NULL;
		if (!got)
			gb_jit__ring_wait(jit, 1);
	}
}

Test(jit_mark, markers_count_in_the_ring_budget)
{
	/* A 3-instruction function entered a million times: a marker for
	 * every 3 records, the ring going round twice. */
	mem = jit_map_near((uint64_t)mk_inc);
	jit = jit_open_nostop(&mem, mk_inc, mk_inc_end, 10000);
	uint64_t e = gb_jit__entry(jit, (uint64_t)mk_inc, jit_fetch, NULL);
	cr_assert_neq(e, 0);
	gb_jit__ring_reset(jit);
	struct drain d = { 0 };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, drain, &d), 0);
	enum { N = 1000000 };
	uint64_t (*f)(uint64_t) = (uint64_t (*)(uint64_t))e;
	uint64_t s = 0;
	for (int k = 0; k < N; k++)
		s = f(s);
	cr_assert_eq(s, N);
	d.done = 1;
	pthread_join(th, NULL);
	cr_assert_eq(d.err, 0, "the ring holds garbage (a marker overran it?)");
	struct gb_jit_ring_state st;
	gb_jit__ring_state(jit, &st);
	cr_assert(!st.dropping);
	cr_assert_eq(d.marks, (size_t)N);
	cr_assert_eq(d.insns, 3 * (size_t)N);
	cr_assert_gt(st.consumed, (uint64_t)GB_JIT_RING_SIZE / 8, "the ring went round");
}

/* rax = rdi + 1; rax += rdi; ret: handed over at the add (its first
 * instruction ran elsewhere, as a uprobe's does), through mk_call_rax
 * (rdi: where to go, rsi: rdi there, rdx: rax there). */
extern uint8_t mk_two[], mk_two_add[], mk_two_ret[], mk_two_end[];
uint64_t mk_call_rax(uint64_t to, uint64_t rdi, uint64_t rax);
__asm__(
	".text\n"
	".globl mk_two, mk_two_add, mk_two_ret, mk_two_end, mk_call_rax\n"
	"mk_two:\n"
	"	lea 1(%rdi), %rax\n"
	"mk_two_add:\n"
	"	add %rdi, %rax\n"
	"mk_two_ret:\n"
	"	ret\n"
	"mk_two_end:\n"
	"mk_call_rax:\n"
	"	mov %rdi, %rcx\n"
	"	mov %rsi, %rdi\n"
	"	mov %rdx, %rax\n"
	"	jmp *%rcx\n");

Test(jit_mark, a_lock_handed_over_by_gebpf_starts_the_threads_stretch)
{
	mem = jit_map_near((uint64_t)mk_two);
	jit = jit_open_nostop(&mem, mk_two, mk_two_end, 1000);
	gb_jit__ring_reset(jit);
	cr_assert_eq(gb_jit__enter_held(jit, 3, (uint64_t)mk_two_end + 64, jit_fetch, NULL), 0,
		     "no block outside the range");
	cr_assert_eq(gb_jit__ring_used(jit), 0, "nothing written without a block");
	for (int round = 0; round < 2; round++) {
		cr_assert_eq(gb_jit__lock_try(jit), 1);
		uint64_t blk = gb_jit__enter_held(jit, 3, (uint64_t)mk_two_add, jit_fetch, NULL);
		cr_assert_neq(blk, 0);
		cr_assert_eq(mk_call_rax(blk, 10, 11 + round), 21 + round,
			     "the instruction before ran elsewhere: rax comes as it left it");
		cr_assert_eq(gb_jit__lock_word(jit), 0, "released at the ret out");
	}
	struct gb_jit_cursor c = { 0 };
	struct gb_jit_rec r;
	for (int round = 0; round < 2; round++) {
		cr_assert_eq(gb_jit__ring_poll(jit, &c, &r), 1);
		cr_assert(r.kind == GB_JIT_REC_MARK && r.area == 3, "the marker first (area %u)",
			  r.area);
		cr_assert_eq(gb_jit__ring_poll(jit, &c, &r), 1);
		cr_assert(r.kind == GB_JIT_REC_INSN && r.pc == (uint64_t)mk_two_add);
		cr_assert_eq(gb_jit__ring_poll(jit, &c, &r), 1);
		cr_assert(r.kind == GB_JIT_REC_INSN && r.pc == (uint64_t)mk_two_ret);
		cr_assert_eq(r.nacc, 1, "the ret's read");
	}
	cr_assert_eq(gb_jit__ring_poll(jit, &c, &r), 0, "nothing else: no record of the lea");
}

static void *release_later(void *arg)
{
	usleep(3000);
	gb_jit__lock_release(arg);
	return NULL;
}

static double mono_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

Test(jit_mark, gebpf_takes_the_lock_when_a_stretch_frees_it)
{
	mem = jit_map_near((uint64_t)mk_two);
	jit = jit_open_nostop(&mem, mk_two, mk_two_end, 1000);
	cr_assert_eq(gb_jit__lock_try(jit), 1);
	double t0 = mono_s();
	cr_assert_eq(gb_jit__lock_try_for(jit, 1000), 0, "held: not within 1 ms");
	cr_assert_geq(mono_s() - t0, 0.001);
	pthread_t th;
	/* (the clock read before the thread is made: it may sleep its 3 ms
	 * before this thread runs again, on a loaded machine) */
	t0 = mono_s();
	cr_assert_eq(pthread_create(&th, NULL, release_later, jit), 0);
	cr_assert_eq(gb_jit__lock_try_for(jit, 2000000), 1, "taken once released");
	cr_assert_geq(mono_s() - t0, 0.003, "taken before the release");
	cr_assert_eq(gb_jit__lock_word(jit), 1);
	pthread_join(th, NULL);
	gb_jit__lock_release(jit);
	cr_assert_eq(gb_jit__lock_word(jit), 0);
}

struct asker { uint64_t entry; unsigned k; uint64_t got; };

static void *ask(void *arg)
{
	struct asker *a = arg;
	if (syscall(SYS_arch_prctl, ARCH_SET_GS, gb_jit__tls(jit, a->k)))
		return (void *)1;
	a->got = ((uint64_t (*)(uint64_t))a->entry)(a->k * 10);
	return NULL;
}

static void wait_word(uint32_t want)
{
	for (int k = 0; k < 400 && gb_jit__lock_word(jit) != want; k++)
		usleep(5000);
	cr_assert_eq(gb_jit__lock_word(jit), want);
	usleep(20000); /* (in its FUTEX_WAIT) */
}

Test(jit_mark, waiting_threads_get_the_range_in_the_order_they_asked)
{
	mem = jit_map_near((uint64_t)mk_inc);
	jit = jit_open_nostop(&mem, mk_inc, mk_inc_end, 1000);
	uint64_t e = gb_jit__entry(jit, (uint64_t)mk_inc, jit_fetch, NULL);
	cr_assert_neq(e, 0);
	gb_jit__ring_reset(jit);
	cr_assert_eq(gb_jit__lock_try(jit), 1);
	struct asker a[3] = { { e, 5, 0 }, { e, 9, 0 }, { e, 2, 0 } };
	pthread_t th[3];
	cr_assert_eq(pthread_create(&th[0], NULL, ask, &a[0]), 0);
	wait_word(2);
	cr_assert_eq(gb_jit__lock_try_for(jit, 500), 0, "a ticket of gebpf's, given up");
	cr_assert_eq(gb_jit__lock_word(jit), 3, "still counted");
	cr_assert_eq(pthread_create(&th[1], NULL, ask, &a[1]), 0);
	wait_word(4);
	cr_assert_eq(pthread_create(&th[2], NULL, ask, &a[2]), 0);
	wait_word(5);
	gb_jit__lock_release(jit);
	for (int k = 0; k < 3; k++) {
		cr_assert_eq(pthread_join(th[k], NULL), 0);
		cr_assert_eq(a[k].got, a[k].k * 10 + 1);
	}
	cr_assert_eq(gb_jit__lock_word(jit), 0, "the given-up ticket passed over by a release");
	struct gb_jit_cursor c = { 0 };
	struct gb_jit_rec r;
	unsigned order[3], n = 0;
	while (gb_jit__ring_poll(jit, &c, &r) == 1)
		if (r.kind == GB_JIT_REC_MARK && n < 3)
			order[n++] = r.area;
	cr_assert_eq(n, 3);
	cr_assert(order[0] == 5 && order[1] == 9 && order[2] == 2, "in the order they asked: %u %u %u",
		  order[0], order[1], order[2]);
}
