/* Harmless without gebpf (user/jit/live.c, docs/trace.md "Harmless without
 * gebpf"): the code cache's liveness word, marked by the kernel when the
 * thread holding it dies, and what every piece of the cache does once it
 * says gebpf is gone: an entry runs the original code from its native copy,
 * a thread waiting for the lock gives its ticket up, a system call of the
 * range returns to the original code, the ring's writer drops at once.
 * "gebpf" here is a forked child that takes the word (and the lock) as the
 * worker does, and is SIGKILLed. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jit/jit.h"
#include "jit_util.h"

extern uint8_t jt_sum[], jt_sum_end[];     /* test_jit.c: sum of 5s, n iterations */
extern uint8_t ns_sys[], ns_sys_end[];     /* test_jit_nostop.c: read(rdi, rsi, rdx) */

static struct gb_jit_mem mem;
static struct gb_jit *jit;
static pid_t holder;     /* "gebpf": holds the word, maybe the lock */

static void teardown(void)
{
	if (holder > 0) {
		kill(holder, SIGKILL);
		waitpid(holder, NULL, 0);
	}
	holder = 0;
	gb_jit__free(jit);
	jit = NULL;
	munmap(mem.code, GB_JIT_SIZE);
}

TestSuite(jit_live, .fini = teardown, .timeout = 60);

static int read_self(void *ctx, uint64_t addr, void *buf, size_t n)
{
	(void)ctx;
	memcpy(buf, (const void *)(uintptr_t)addr, n);
	return 0;
}

/* A stop-free cache over [lo, end), shared (a forked child takes its word),
 * with the owner check as the patch trap makes it: this thread area 0's
 * owner; the writer waits ring_ms for a consumer. */
static uint64_t open_live(const void *lo, const void *end, uint32_t ring_ms)
{
	bool fsgsbase = getauxval(AT_HWCAP2) & (1 << 1);
	mem = jit_map_near_as((uint64_t)lo, true);
	struct gb_jit_opts o = { .nostop = true, .ring_timeout_ms = ring_ms, .owner_check = true,
				 .owner_tcb = !fsgsbase, .read = read_self };
	jit = gb_jit__new_opts(&mem, (uint64_t)lo, (uint64_t)end - 1, &o);
	cr_assert_not_null(jit);
	cr_assert_eq(syscall(SYS_arch_prctl, ARCH_SET_GS, gb_jit__tls(jit, 0)), 0);
	unsigned long fs = 0;
	cr_assert_eq(syscall(SYS_arch_prctl, ARCH_GET_FS, &fs), 0);
	gb_jit__area_fs(jit, 0, fs);
	uint64_t e = gb_jit__entry(jit, (uint64_t)lo, jit_fetch, NULL);
	cr_assert_neq(e, 0);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)lo, jit_fetch, NULL), 0);
	struct gb_jit_stats js;
	gb_jit__stats(jit, &js);
	cr_assert_eq(js.owner_checks, js.entries, "the entry block has its check");
	gb_jit__ring_reset(jit);
	return e;
}

/* Fork "gebpf": it takes the liveness word (and with lock, the cache's
 * lock, as gebpf does to translate a miss) and waits to be killed. */
static void start_holder(bool lock)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	holder = fork();
	cr_assert_geq(holder, 0);
	if (holder == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* (a test that crashes leaves none) */
		char ok = gb_jit__live_start(jit) == 0 && (!lock || gb_jit__lock_try(jit) == 1) ? 'y' : 'n';
		if (write(p[1], &ok, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	char c = 0;
	cr_assert_eq(read(p[0], &c, 1), 1);
	cr_assert_eq(c, 'y', "the holder took the word%s", lock ? " and the lock" : "");
	close(p[0]);
	close(p[1]);
	cr_assert(gb_jit__live(jit), "the word says served while its holder lives");
}

static void kill_holder(void)
{
	cr_assert_eq(kill(holder, SIGKILL), 0);
	cr_assert_eq(waitpid(holder, NULL, 0), holder);
	holder = 0;
}

static size_t records(void)
{
	size_t pos = 0, n = 0;
	struct gb_jit_rec rec;
	while (gb_jit__ring_next(jit, &pos, 0, 0, &rec) == 1)
		n += rec.kind != GB_JIT_REC_MARK;
	return n;
}

static char task_state(pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')');
	return p && p[1] ? p[2] : '?';
}

Test(jit_live, the_kernel_marks_the_word_when_its_holder_is_killed)
{
	open_live(jt_sum, jt_sum_end, 200);
	cr_assert(gb_jit__live(jit), "a new cache reads as served (nothing is patched yet)");
	start_holder(false);
	uint32_t w = *(volatile uint32_t *)(mem.data + 384);
	cr_assert_eq(w & 0x3fffffff, (uint32_t)holder, "the holder's tid in the word (%#x)", w);
	kill_holder();
	w = *(volatile uint32_t *)(mem.data + 384);
	cr_assert_eq(w, GB_JIT_LIVE_GONE, "FUTEX_OWNER_DIED, set by the kernel (%#x)", w);
	cr_assert_not(gb_jit__live(jit));
}

Test(jit_live, gebpf_letting_go_marks_it_too)
{
	open_live(jt_sum, jt_sum_end, 200);
	cr_assert_eq(gb_jit__live_start(jit), 0);
	cr_assert(gb_jit__live(jit));
	gb_jit__live_end(jit);
	cr_assert_not(gb_jit__live(jit));
	cr_assert_eq(*(volatile uint32_t *)(mem.data + 384), GB_JIT_LIVE_GONE);
}

typedef long (*fn1_t)(long);

Test(jit_live, once_gebpf_is_gone_an_entry_runs_the_original_code)
{
	uint64_t e = open_live(jt_sum, jt_sum_end, 200);
	start_holder(true); /* the lock held by "gebpf" */
	kill_holder();
	for (int k = 0; k < 3; k++)
		cr_assert_eq(((fn1_t)e)(1000), 5 * 1000, "native result, with the lock never released");
	cr_assert_eq(records(), 0, "nothing recorded");
	cr_assert_eq(gb_jit__lock_word(jit), 1, "the lock untouched (still the dead holder's)");
}

struct waiter { uint64_t e; volatile pid_t tid; long r; volatile int done; };

static void *wait_entry(void *arg)
{
	struct waiter *w = arg;
	w->tid = (pid_t)syscall(SYS_gettid);
	/* area 0's owner too (same fs base key? no: its own area, its own key) */
	if (syscall(SYS_arch_prctl, ARCH_SET_GS, gb_jit__tls(jit, 1)))
		return (void *)1;
	unsigned long fs = 0;
	syscall(SYS_arch_prctl, ARCH_GET_FS, &fs);
	gb_jit__area_fs(jit, 1, fs);
	w->r = ((fn1_t)w->e)(500);
	w->done = 1;
	return NULL;
}

Test(jit_live, a_thread_waiting_for_the_lock_goes_on_when_gebpf_dies)
{
	uint64_t e = open_live(jt_sum, jt_sum_end, 200);
	start_holder(true);
	struct waiter w = { e, 0, 0, 0 };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, wait_entry, &w), 0);
	char st = '?';
	for (int k = 0; k < 400 && st != 'S'; k++) {
		usleep(5000);
		st = w.tid ? task_state(w.tid) : '?';
	}
	cr_assert_eq(st, 'S', "the waiter sleeps for the lock (state %c)", st);
	usleep(3 * GB_JIT_LOCK_SLEEP_MS * 1000); /* (its bounded sleeps, gebpf alive: it waits on) */
	cr_assert_eq(w.done, 0, "it waits while gebpf lives");
	kill_holder();
	void *r;
	cr_assert_eq(pthread_join(th, &r), 0);
	cr_assert_null(r);
	cr_assert_eq(w.r, 5 * 500, "the native result, from the entry's copy");
	cr_assert_eq(records(), 0, "nothing recorded");
}

struct reader { uint64_t e; int fd; char c; long r; volatile pid_t tid; };

static void *read_entry(void *arg)
{
	struct reader *r = arg;
	r->tid = (pid_t)syscall(SYS_gettid);
	if (syscall(SYS_arch_prctl, ARCH_SET_GS, gb_jit__tls(jit, 2)))
		return (void *)1;
	unsigned long fs = 0;
	syscall(SYS_arch_prctl, ARCH_GET_FS, &fs);
	gb_jit__area_fs(jit, 2, fs);
	r->r = ((long (*)(int, char *, long))r->e)(r->fd, &r->c, 1);
	return NULL;
}

Test(jit_live, after_a_system_call_of_the_range_the_original_code_goes_on)
{
	uint64_t e = open_live(ns_sys, ns_sys_end, 200);
	start_holder(false);
	int p[2];
	cr_assert_eq(pipe(p), 0);
	struct reader rd = { e, p[0], 0, 0, 0 };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, read_entry, &rd), 0);
	char st = '?';
	for (int k = 0; k < 400 && st != 'S'; k++) {
		usleep(5000);
		st = rd.tid ? task_state(rd.tid) : '?';
	}
	cr_assert_eq(st, 'S', "the reader blocks in its read, in the range (state %c)", st);
	/* gebpf takes the lock (the reader made its call without it) and dies
	 * holding it: the reader's way back may not wait for it */
	cr_assert_eq(gb_jit__lock_try(jit), 1);
	kill_holder();
	cr_assert_eq(write(p[1], "z", 1), 1);
	void *r;
	cr_assert_eq(pthread_join(th, &r), 0);
	cr_assert_null(r);
	cr_assert_eq(rd.r, 1);
	cr_assert_eq(rd.c, 'z');
	cr_assert_eq(records(), 2, "its mov and syscall; the ret ran natively");
	cr_assert_eq(gb_jit__lock_word(jit), 1, "the lock still gebpf's: never taken again");
}

Test(jit_live, the_rings_writer_drops_at_once_when_nobody_will_read)
{
	/* a writer that would wait a minute for its consumer */
	uint64_t e = open_live(jt_sum, jt_sum_end, 60000);
	start_holder(false);
	kill_holder();
	/* only the threads already in the cache write: one the lock handed
	 * over from outside (gb_jit__enter_held), as if it was inside when
	 * gebpf died */
	(void)e;
	cr_assert_eq(gb_jit__lock_try(jit), 1);
	uint64_t blk = gb_jit__enter_held(jit, 0, (uint64_t)jt_sum, jit_fetch, NULL);
	cr_assert_neq(blk, 0);
	long n = 400000;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(((fn1_t)blk)(n), 5 * n, "native result");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_assert_lt(s, 30.0, "it waited %.1f s for a consumer that is gone", s);
	struct gb_jit_ring_state rs;
	gb_jit__ring_state(jit, &rs);
	cr_assert(rs.dropping, "dropping");
	size_t kept = records();
	cr_assert_eq(kept + rs.dropped, 3 + 7 * (size_t)n + 2, "kept %zu + dropped %lu: every record "
		     "counted", kept, (unsigned long)rs.dropped);
	cr_assert_eq(gb_jit__lock_word(jit), 0, "released at its exit");
}

struct looper { uint64_t blk; long n, r; volatile int started; };

static void *loop_held(void *arg)
{
	struct looper *l = arg;
	if (syscall(SYS_arch_prctl, ARCH_SET_GS, gb_jit__tls(jit, 0)))
		return (void *)1;
	l->started = 1;
	l->r = ((fn1_t)l->blk)(l->n);
	return NULL;
}

Test(jit_live, a_stretch_under_way_leaves_the_cache_at_its_next_block_when_gebpf_dies)
{
	/* A long loop in the range, entered while gebpf serves the cache (the
	 * lock handed over, as at a probed entry), gebpf killed while it runs:
	 * its next block head sends it to the original code (a way set by
	 * gb_jit__ways), so nearly all of it runs natively, writing nothing.
	 * (Where the loop fills the ring before the kill, as on a loaded
	 * machine where this thread's sleep runs long, the writer waits for
	 * its consumer and leaves at its next wake, a second later: the same
	 * outcome; a minute's wait made that a test timeout, as in a CI's
	 * sanitizer pass.) */
	uint64_t e = open_live(jt_sum, jt_sum_end, 1000);
	(void)e;
	start_holder(false);
	cr_assert_eq(gb_jit__lock_try(jit), 1);
	uint64_t blk = gb_jit__enter_held(jit, 0, (uint64_t)jt_sum, jit_fetch, NULL);
	cr_assert_neq(blk, 0);
	cr_assert_gt(gb_jit__ways(jit), 0, "the blocks' ways set");
	struct looper l = { blk, 50000000, 0, 0 };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, loop_held, &l), 0);
	while (!l.started)
		usleep(1000);
	usleep(5000);
	kill_holder();
	cr_assert_eq(pthread_join(th, NULL), 0);
	cr_assert_eq(l.r, 5 * l.n, "native result");
	struct gb_jit_ring_state rs;
	gb_jit__ring_state(jit, &rs);
	size_t kept = records();
	cr_assert_lt(kept + rs.dropped, 3 + 7 * (size_t)l.n, "kept %zu + dropped %lu: some of the "
		     "loop ran natively", kept, (unsigned long)rs.dropped);
	cr_assert_lt(rs.dropped, 64, "%lu records dropped after gebpf died: it went on translated",
		     (unsigned long)rs.dropped);
}

Test(jit_live, a_writer_waiting_for_the_consumer_leaves_natively_when_gebpf_dies)
{
	/* The ring full, nobody reading, the writer asleep for its consumer
	 * (300 ms at a time) when gebpf dies: at its wake it sees gebpf gone
	 * and leaves for the block's original code, dropping nothing. */
	open_live(jt_sum, jt_sum_end, 300);
	start_holder(false);
	cr_assert_eq(gb_jit__lock_try(jit), 1);
	uint64_t blk = gb_jit__enter_held(jit, 0, (uint64_t)jt_sum, jit_fetch, NULL);
	cr_assert_neq(blk, 0);
	gb_jit__ways(jit);
	struct looper l = { blk, 5000000, 0, 0 };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, loop_held, &l), 0);
	/* (its tid: the only other thread of this process) */
	pid_t tid = 0;
	for (int k = 0; k < 2000 && !tid; k++) {
		DIR *d = opendir("/proc/self/task");
		struct dirent *de;
		while (d && (de = readdir(d)))
			if (atoi(de->d_name) > 0 && atoi(de->d_name) != getpid())
				tid = atoi(de->d_name);
		if (d)
			closedir(d);
		usleep(1000);
	}
	char st = '?';
	for (int k = 0; k < 2000 && st != 'S'; k++) {
		usleep(2000);
		st = task_state(tid);
	}
	cr_assert_eq(st, 'S', "the writer waits for its consumer (state %c)", st);
	kill_holder();
	cr_assert_eq(pthread_join(th, NULL), 0);
	cr_assert_eq(l.r, 5 * l.n, "native result");
	struct gb_jit_ring_state rs;
	gb_jit__ring_state(jit, &rs);
	cr_assert_not(rs.dropping, "it went on dropping: %lu", (unsigned long)rs.dropped);
	cr_assert_lt(records(), 3 + 7 * (size_t)l.n, "the rest ran natively");
}
