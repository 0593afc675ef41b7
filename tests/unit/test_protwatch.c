/* The protection watcher (user/probe/protwatch.h) against a real tracee: a
 * forked child, seized with PTRACE_SEIZE, changes protections inside and
 * outside the watched range after a pipe handshake.  The parent checks that
 * exactly the in-range calls come back as records, each with one SIGURG
 * stop that claim() owns, and that a SIGURG the child sends itself is not
 * claimed.  Needs root and BPF: skipped with the reason otherwise. */
#include <criterion/criterion.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe/protwatch.h"
#include "pt_util.h"

#define PG 4096ul
#define NPAGES 8
#define MAXC 64
#define MAXSTOPS 16

/* What the parent saw: per SIGURG stop, claim()'s answer and the changes
 * drained at that stop. */
struct stop {
	bool claimed;
	int first, n;          /* changes[first .. first+n) */
};

struct seen {
	struct gb_prot_change c[MAXC];
	int nc;
	struct stop s[MAXSTOPS];
	int ns;
	int exit_code;
};

static void on_change(void *ctx, const struct gb_prot_change *c)
{
	struct seen *s = ctx;
	if (s->nc < MAXC)
		s->c[s->nc++] = *c;
}

static void need_bpf(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root for BPF (CAP_BPF, CAP_PERFMON)");
	if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_RAW_TRACEPOINT, BPF_FUNC_send_signal_thread,
				    NULL) != 1)
		cr_skip_test("kernel lacks bpf_send_signal_thread (Linux 5.5)");
	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) != 1)
		cr_skip_test("kernel lacks BPF ring buffers (Linux 5.8)");
}

typedef void (*child_fn)(uint8_t *p);

struct call {
	child_fn fn;
	uint8_t *p;
};

static void call(void *arg)
{
	struct call *c = arg;
	c->fn(c->p);
}

/* Fork a child that runs fn(p) once the parent (its tracer by then, with
 * the watcher attached) opens the gate (pt_util.h); trace it to its exit. */
static void run(uint8_t *p, child_fn fn, struct seen *out)
{
	int gate, status;
	struct call c = { fn, p };

	memset(out, 0, sizeof(*out));
	pid_t pid = pt_fork_gated(call, &c, 0, &gate);

	struct gb_protwatch *w = gb_protwatch__new(&(struct gb_protwatch_opts){
		.tgid = pid, .start = (uintptr_t)(p + 2 * PG), .end = (uintptr_t)(p + 6 * PG),
		.signo = SIGURG });
	if (!w)
		kill(pid, SIGKILL);
	cr_assert_not_null(w, "gb_protwatch__new failed (see stderr)");
	pt_gate_open(gate);

	for (;;) {
		cr_assert(waitpid(pid, &status, __WALL) == pid);
		if (WIFEXITED(status)) {
			out->exit_code = WEXITSTATUS(status);
			break;
		}
		cr_assert(!WIFSIGNALED(status), "child killed by signal %d", WTERMSIG(status));
		cr_assert(WIFSTOPPED(status));
		int sig = WSTOPSIG(status), deliver = sig;
		if (sig == SIGURG) {
			cr_assert(out->ns < MAXSTOPS);
			struct stop *st = &out->s[out->ns++];
			st->claimed = gb_protwatch__claim(w, pid);
			st->first = out->nc;
			int n = gb_protwatch__drain(w, on_change, out);
			cr_assert(n >= 0, "drain: %s", strerror(-n));
			st->n = out->nc - st->first;
			cr_assert_eq(n, st->n);
			if (st->claimed)
				deliver = 0;
		}
		cr_assert(ptrace(PTRACE_CONT, pid, 0, deliver) == 0);
	}
	/* Nothing left behind: no record, no unclaimed signal. */
	cr_assert_eq(gb_protwatch__drain(w, on_change, out), 0);
	cr_assert(!gb_protwatch__claim(w, pid));
	gb_protwatch__free(w);
}

static uint8_t *region(void)
{
	uint8_t *p = mmap(NULL, NPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	cr_assert(p != MAP_FAILED);
	return p;
}

static void expect(const struct gb_prot_change *c, pid_t tid, uint32_t nr, const void *addr,
		   uint64_t len, int prot)
{
	cr_expect_eq(c->tid, tid);
	cr_expect_eq(c->nr, nr, "nr %u, want %u", c->nr, nr);
	cr_expect_eq(c->addr, (uintptr_t)addr, "addr %#lx, want %p", (unsigned long)c->addr, addr);
	cr_expect_eq(c->len, len, "len %#lx, want %#lx", (unsigned long)c->len, (unsigned long)len);
	cr_expect_eq(c->prot, prot, "prot %d, want %d", c->prot, prot);
}

/* Watched: pages 2..5 of the region. */
static void child_basic(uint8_t *p)
{
	if (mprotect(p + 2 * PG, 100, PROT_READ))             /* in: len rounds up to a page */
		_exit(1);
	if (mprotect(p + 7 * PG, PG, PROT_READ))              /* out */
		_exit(2);
	if (munmap(p + 3 * PG, PG))                           /* in */
		_exit(3);
	if (mmap(p + 4 * PG, PG, PROT_READ | PROT_EXEC,       /* in, over a mapped page */
		 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != p + 4 * PG)
		_exit(4);
	if (mprotect(p + 5 * PG + 1, PG, PROT_NONE) == 0)     /* in, but fails: EINVAL */
		_exit(5);
	kill(getpid(), SIGURG);                               /* the program's own SIGURG */
}

Test(protwatch, in_range_calls_are_recorded_signalled_and_claimed)
{
	need_bpf();
	uint8_t *p = region();
	struct seen s;

	run(p, child_basic, &s);
	cr_assert_eq(s.exit_code, 0, "child step %d failed", s.exit_code);
	cr_assert_eq(s.nc, 3, "%d changes, want 3", s.nc);
	cr_assert_eq(s.ns, 4, "%d SIGURG stops, want 4", s.ns);
	for (int i = 0; i < 3; i++) {
		cr_expect(s.s[i].claimed, "stop %d not claimed", i);
		cr_expect_eq(s.s[i].n, 1, "stop %d: %d changes", i, s.s[i].n);
	}
	cr_expect(!s.s[3].claimed, "the child's own SIGURG was claimed");
	cr_expect_eq(s.s[3].n, 0);
	pid_t tid = s.c[0].tid;
	cr_assert_gt(tid, 0);
	expect(&s.c[0], tid, SYS_mprotect, p + 2 * PG, PG, PROT_READ);
	expect(&s.c[1], tid, SYS_munmap, p + 3 * PG, PG, -1);
	expect(&s.c[2], tid, SYS_mmap, p + 4 * PG, PG, PROT_READ | PROT_EXEC);
}

static void child_remap(uint8_t *p)
{
	/* pkey -1: plain mprotect semantics; straddles the end of the range. */
	if (syscall(SYS_pkey_mprotect, p + 5 * PG, 2 * PG, PROT_READ, -1))
		_exit(1);
	/* Both ranges inside: two changes, one signal. */
	if (mremap(p + 2 * PG, PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED, p + 4 * PG) != p + 4 * PG)
		_exit(2);
	/* Both outside. */
	if (mremap(p, PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED, p + PG) != p + PG)
		_exit(3);
	/* Old outside, new inside. */
	if (mremap(p + 7 * PG, PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED, p + 3 * PG) != p + 3 * PG)
		_exit(4);
}

Test(protwatch, pkey_mprotect_and_mremap)
{
	need_bpf();
	uint8_t *p = region();
	struct seen s;

	run(p, child_remap, &s);
	cr_assert_eq(s.exit_code, 0, "child step %d failed", s.exit_code);
	cr_assert_eq(s.ns, 3, "%d SIGURG stops, want 3", s.ns);
	cr_assert_eq(s.nc, 4, "%d changes, want 4", s.nc);
	for (int i = 0; i < 3; i++)
		cr_expect(s.s[i].claimed, "stop %d not claimed", i);
	cr_expect_eq(s.s[0].n, 1);
	cr_expect_eq(s.s[1].n, 2);
	cr_expect_eq(s.s[2].n, 1);
	pid_t tid = s.c[0].tid;
	expect(&s.c[0], tid, SYS_pkey_mprotect, p + 5 * PG, 2 * PG, PROT_READ);
	expect(&s.c[1], tid, SYS_mremap, p + 2 * PG, PG, GB_PROT_UNMAPPED);
	expect(&s.c[2], tid, SYS_mremap, p + 4 * PG, PG, GB_PROT_REREAD);
	expect(&s.c[3], tid, SYS_mremap, p + 3 * PG, PG, GB_PROT_REREAD);
}

/* Ids of loaded programs named gb_prot_* (what `bpftool prog show` lists). */
static int prot_prog_ids(uint32_t *ids, int max)
{
	uint32_t id = 0;
	int n = 0;

	while (bpf_prog_get_next_id(id, &id) == 0) {
		int fd = bpf_prog_get_fd_by_id(id);
		struct bpf_prog_info info;
		uint32_t len = sizeof(info);

		if (fd < 0)
			continue;
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
		    !strncmp(info.name, "gb_prot_", 8) && n < max)
			ids[n++] = id;
		close(fd);
	}
	return n;
}

static bool has(const uint32_t *ids, int n, uint32_t id)
{
	for (int i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

Test(protwatch, free_unloads_everything)
{
	need_bpf();
	uint32_t before[64], during[64], after[64];
	int nb, nd, na = 0, mine = 0, left = 0;

	/* Other tests may load a watcher at the same time: only the ids that
	 * appeared across our __new are ours. */
	nb = prot_prog_ids(before, 64);
	struct gb_protwatch *w = gb_protwatch__new(&(struct gb_protwatch_opts){
		.tgid = getpid(), .start = 0x10000, .end = 0x20000, .signo = SIGURG });
	cr_assert_not_null(w, "gb_protwatch__new failed (see stderr)");
	nd = prot_prog_ids(during, 64);
	gb_protwatch__free(w);
	for (int tries = 0; tries < 100; tries++) {
		na = prot_prog_ids(after, 64);
		left = 0;
		for (int i = 0; i < nd; i++)
			if (!has(before, nb, during[i]) && has(after, na, during[i]))
				left++;
		if (!left)
			break;
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
	}
	for (int i = 0; i < nd; i++)
		mine += !has(before, nb, during[i]);
	cr_assert_geq(mine, 1, "no gb_prot_* program appeared while the watcher was loaded");
	cr_assert_eq(left, 0, "%d gb_prot_* program(s) still loaded after free", left);
}

Test(protwatch, bad_options_give_null)
{
	/* No BPF needed: refused before anything is loaded. */
	cr_assert_null(gb_protwatch__new(&(struct gb_protwatch_opts){
		.tgid = 1, .start = 0x20000, .end = 0x10000, .signo = SIGURG, .quiet = true }));
	cr_assert_null(gb_protwatch__new(&(struct gb_protwatch_opts){
		.tgid = 0, .start = 0x10000, .end = 0x20000, .signo = SIGURG, .quiet = true }));
	cr_assert_null(gb_protwatch__new(&(struct gb_protwatch_opts){
		.tgid = 1, .start = 0x10000, .end = 0x20000, .signo = 0, .quiet = true }));
}
