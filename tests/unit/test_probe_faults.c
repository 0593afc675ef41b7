/* The page-fault capture API (user/probe/faults.h) against a real tracee:
 * tests/progs/faults_pages touches N fresh pages, each exactly once.
 * Needs root and BPF: skipped with the reason otherwise. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe/faults.h"
#include "unit_progs.h"

#define NPAGES 16
#define MAXF 4096

struct got {
	struct gb_fault v[MAXF];
	int n;
};

static int on_fault(void *ctx, const struct gb_fault *f)
{
	struct got *g = ctx;
	if (g->n < MAXF)
		g->v[g->n++] = *f;
	return 0;
}

static void prog_path(const char *name, char *buf, size_t len)
{
	if (unit_prog_path(name, buf, len))
		cr_skip_test("%s not built (make progs)", buf);
}

static void need_root(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root for BPF (CAP_BPF, CAP_PERFMON)");
}

/* Start faults_pages with pipes on stdin/stdout; it waits for a gate byte. */
static pid_t spawn(const char *path, char *const extra[], int *to_child, int *from_child)
{
	int in[2], out[2];
	signal(SIGPIPE, SIG_IGN);   /* a dead tracee fails an assertion, not the test process */
	cr_assert(pipe(in) == 0 && pipe(out) == 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[0]); close(in[1]); close(out[0]); close(out[1]);
		char *argv[8] = { (char *)path };
		for (int i = 0; extra[i] && i < 6; i++)
			argv[i + 1] = extra[i];
		execv(path, argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	*to_child = in[1];
	*from_child = out[0];
	return pid;
}

static void read_line(int fd, char *buf, size_t len)
{
	size_t n = 0;
	while (n + 1 < len && read(fd, buf + n, 1) == 1 && buf[n] != '\n')
		n++;
	buf[n] = 0;
}

/* One drain right after each touch: that touch's fault, and only it, is
 * there (the record is written in the fault path, before the writing
 * instruction completes). */
Test(probe_faults, one_drain_sees_the_fault_just_taken)
{
	char path[PATH_MAX], line[512];
	int to, from;
	struct got *g = calloc(1, sizeof(*g));

	need_root();
	prog_path("faults_pages", path, sizeof(path));
	char *extra[] = { "16", "--sync", NULL };
	pid_t pid = spawn(path, extra, &to, &from);

	struct gb_faults_opts o = { .tgid = pid };
	struct gb_faults *f = gb_faults__new(&o);
	cr_assert_not_null(f, "gb_faults__new failed (see stderr)");
	cr_assert_eq(gb_faults__start(f), 0);
	cr_assert_eq(write(to, "g", 1), 1);

	uint64_t prev_addr = 0;
	for (int i = 0; i < NPAGES; i++) {
		char c;
		cr_assert_eq(read(from, &c, 1), 1, "page %d: tracee gone", i);
		g->n = 0;
		int n = gb_faults__drain(f, on_fault, g);
		cr_assert_eq(n, 1, "page %d: one drain delivered %d faults, want 1", i, n);
		cr_assert_eq(g->v[0].tid, pid);
		cr_assert_eq(g->v[0].err & 6, 6, "page %d: err %#lx is not a user write", i,
			     (unsigned long)g->v[0].err);
		if (i) /* pages are consecutive: each touch is a page further */
			cr_assert_eq(g->v[0].addr - prev_addr, 4096 + ((i % 8) - ((i - 1) % 8)) * 8,
				     "page %d at %#lx after %#lx", i, (unsigned long)g->v[0].addr,
				     (unsigned long)prev_addr);
		prev_addr = g->v[0].addr;
		cr_assert_eq(write(to, "a", 1), 1);
	}
	read_line(from, line, sizeof(line));
	unsigned long base = 0;
	char *b = strstr(line, "\"base\":\"");
	cr_assert_not_null(b, "no base in %s", line);
	base = strtoul(b + 8, NULL, 16);
	cr_assert_eq(prev_addr, base + (NPAGES - 1) * 4096 + ((NPAGES - 1) % 8) * 8);

	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct gb_faults_stats s;
	gb_faults__stats(f, &s);
	cr_assert_eq(s.lost, 0);
	cr_assert_geq(s.recorded, NPAGES);
	gb_faults__free(f);
	free(g);
}

/* No gate per page: N faults at exactly the expected addresses, from
 * touch_pages, and as many as the kernel's own minflt+majflt counters. */
Test(probe_faults, n_pages_n_faults_equal_to_rusage)
{
	char path[PATH_MAX], line[512];
	int to, from;
	struct got *g = calloc(1, sizeof(*g));

	need_root();
	prog_path("faults_pages", path, sizeof(path));
	char *extra[] = { "200", "--gate", NULL };
	pid_t pid = spawn(path, extra, &to, &from);

	struct gb_faults_opts o = { .tgid = pid, .wakeup_bytes = 4096 };
	struct gb_faults *f = gb_faults__new(&o);
	cr_assert_not_null(f);
	cr_assert_eq(gb_faults__start(f), 0);
	cr_assert_eq(write(to, "g", 1), 1);
	int st;
	read_line(from, line, sizeof(line));
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	gb_faults__stop(f);
	cr_assert_geq(gb_faults__drain(f, on_fault, g), 0);

	unsigned long base = 0;
	long long t0 = 0, t1 = 0;
	long minflt = -1, majflt = -1, pages = 0;
	cr_assert_eq(sscanf(line, "{\"pid\":%*d,\"base\":\"%lx\",\"pages\":%ld,\"t0\":%lld,\"t1\":%lld,"
			    "\"minflt\":%ld,\"majflt\":%ld,", &base, &pages, &t0, &t1, &minflt, &majflt),
		     6, "unexpected line %s", line);
	int in_span = 0;
	unsigned char seen[200] = { 0 };
	for (int i = 0; i < g->n; i++) {
		const struct gb_fault *x = &g->v[i];
		cr_assert_eq(x->tid, pid);
		if ((long long)x->ns < t0 || (long long)x->ns > t1)
			continue;
		in_span++;
		uint64_t off = x->addr - base;
		long page = (long)(off / 4096);
		cr_assert(x->addr >= base && page < 200, "fault at %#lx outside the pages",
			  (unsigned long)x->addr);
		cr_assert_eq(off % 4096, (uint64_t)(page % 8) * 8, "fault at %#lx", (unsigned long)x->addr);
		cr_assert_eq(seen[page], 0, "page %ld faulted twice", page);
		seen[page] = 1;
	}
	cr_assert_eq(in_span, 200, "%d faults in the span, want 200", in_span);
	cr_assert_eq(in_span, minflt + majflt, "BPF saw %d faults, rusage %ld+%ld", in_span, minflt,
		     majflt);
	gb_faults__free(f);
	free(g);
}
