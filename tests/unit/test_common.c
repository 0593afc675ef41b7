/* The small helpers of user/common every room leans on: the one binary
 * search (bound.h), the one array growth (grow.h), the log (log.h) and
 * the worker's knowledge of who gebpf is (guard.h). */
#include <bpf/libbpf.h>
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/bound.h"
#include "common/grow.h"
#include "common/guard.h"
#include "common/log.h"

struct span {
	int tag;
	uint64_t start, end;
};

Test(bound, upper_lower_and_intervals)
{
	const struct span v[] = { { 1, 0x1000, 0x2000 }, { 2, 0x2000, 0x3000 }, { 3, 0x5000, 0x6000 } };
	cr_assert_eq(GB_UPPER(v, 3, start, 0x0fff), 0);
	cr_assert_eq(GB_UPPER(v, 3, start, 0x1000), 1);
	cr_assert_eq(GB_UPPER(v, 3, start, 0x4000), 2);
	cr_assert_eq(GB_UPPER(v, 3, start, UINT64_MAX), 3);
	cr_assert_eq(GB_LOWER(v, 3, start, 0x1000), 0);
	cr_assert_eq(GB_LOWER(v, 3, start, 0x1001), 1);
	cr_assert_eq(GB_LOWER(v, 3, start, 0x5000), 2);
	cr_assert_eq(GB_LOWER(v, 3, start, 0x5001), 3);
	/* The interval holding a: the last start <= a, if a is before its end. */
	const uint64_t probe[] = { 0x1000, 0x1fff, 0x2000, 0x3000, 0x4fff, 0x5fff, 0x6000 };
	const int want[] = { 1, 1, 2, 0, 0, 3, 0 };
	for (size_t k = 0; k < sizeof(probe) / sizeof(*probe); k++) {
		size_t i = GB_UPPER(v, 3, start, probe[k]);
		int got = i && probe[k] < v[i - 1].end ? v[i - 1].tag : 0;
		cr_assert_eq(got, want[k], "%#lx: %d, want %d", (unsigned long)probe[k], got, want[k]);
	}
	/* Empty (a NULL array is fine) and plain uint64_t arrays. */
	const struct span *none = NULL;
	cr_assert_eq(GB_UPPER(none, 0, start, 5), 0);
	const uint64_t u[] = { 2, 4, 4, 8 };
	cr_assert_eq(GB_UPPER_U64(u, 4, 4), 3);
	cr_assert_eq(GB_UPPER_U64(u, 4, 1), 0);
	cr_assert_eq(GB_UPPER_U64(u, 4, 9), 4);
}

Test(grow, keeps_items_and_fails_loudly, .init = cr_redirect_stderr)
{
	int *v = NULL;
	size_t cap = 0, n = 0;
	for (int i = 0; i < 1000; i++) {
		cr_assert_eq(GB_GROW(&v, &cap, n + 1), 0);
		v[n++] = i;
	}
	cr_assert_geq(cap, 1000);
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(v[i], i);
	/* A size that cannot be had: -ENOMEM, the array untouched, one line said. */
	int *was = v;
	size_t was_cap = cap;
	cr_assert_eq(gb_grow((void **)&v, &cap, SIZE_MAX / 2, sizeof(*v)), -ENOMEM);
	cr_assert(v == was && cap == was_cap && v[999] == 999);
	fflush(stderr);
	char out[512] = "";
	out[fread(out, 1, sizeof(out) - 1, cr_get_redirected_stderr())] = 0;
	cr_assert(!strncmp(out, "gebpf: out of memory (growing an array to ", 42), "%s", out);
	free(v);
}

/* gb_log_demote_warnings: a demoted warning is an -v line (no "warning: "),
 * nothing without -v; errors are never demoted; off again, warnings are
 * warnings. */
Test(log, demoted_warnings_are_verbose_lines, .init = cr_redirect_stderr)
{
	gb_log_set_verbose(false);
	gb_log_demote_warnings(true);
	gb_warn("quiet %d", 1);
	gb_err("an error %d", 2);
	gb_log_set_verbose(true);
	gb_warn("said %d", 3);
	gb_log_demote_warnings(false);
	gb_warn("loud %d", 4);
	gb_log_set_verbose(false);
	fflush(stderr);
	cr_assert_stderr_eq_str("gebpf: an error 2\ngebpf: said 3\ngebpf: warning: loud 4\n");
}

static void libbpf_says(int level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	gb_libbpf_print(level, fmt, ap);
	va_end(ap);
}

/* libbpf's lines: none by default (gebpf says a failure in its own line),
 * its warnings under -v, its debug and info lines too only under --debug. */
Test(log, libbpf_lines_by_level, .init = cr_redirect_stderr)
{
	gb_log_set_verbose(false);
	libbpf_says(LIBBPF_WARN, "libbpf: warn %d\n", 1);
	libbpf_says(LIBBPF_DEBUG, "libbpf: debug %d\n", 1);
	gb_log_set_verbose(true);
	libbpf_says(LIBBPF_WARN, "libbpf: warn %d\n", 2);
	libbpf_says(LIBBPF_INFO, "libbpf: info %d\n", 2);
	libbpf_says(LIBBPF_DEBUG, "libbpf: debug %d\n", 2);
	gb_log_set_debug(true);
	libbpf_says(LIBBPF_INFO, "libbpf: info %d\n", 3);
	libbpf_says(LIBBPF_DEBUG, "libbpf: debug %d\n", 3);
	gb_log_set_debug(false);
	gb_log_set_verbose(false);
	fflush(stderr);
	cr_assert_stderr_eq_str("libbpf: warn 2\nlibbpf: info 3\nlibbpf: debug 3\n");
}

static void *park(void *arg)
{
	pause();
	return arg;
}

/* gb_guard_self outside a worker: this process and its threads are gebpf;
 * its parent (not gebpf's: there is no worker) and a child are not. */
Test(guard, self_is_this_process_and_its_threads)
{
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, park, NULL), 0);
	pid_t tids[64];
	size_t n = 0;
	DIR *d = opendir("/proc/self/task");
	cr_assert(d);
	for (struct dirent *de; (de = readdir(d)) && n < 64;)
		if (atoi(de->d_name) > 0)
			tids[n++] = atoi(de->d_name);
	closedir(d);
	cr_assert_geq(n, 2);
	for (size_t i = 0; i < n; i++) {
		const char *why = gb_guard_self(tids[i]);
		cr_assert(why && strstr(why, "is gebpf itself"), "tid %d: %s", tids[i], why ? why : "NULL");
	}
	cr_assert_null(gb_guard_self(getppid()));
	pid_t child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	cr_assert_null(gb_guard_self(child));
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	cr_assert_null(gb_guard_self(0));
}
