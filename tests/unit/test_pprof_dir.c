/* Continuous mode's directory of profiles without a kernel: names from the
 * host and the period's UTC start, nothing but whole files under final
 * names, and the --keep / --max-age bounds touching only this host's
 * profiles.  Run: .output/unit-tests --filter 'pprof_dir/...'. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sample/pprof_dir.h"

static char host[HOST_NAME_MAX + 1];

static void setup_host(void)
{
	cr_assert_eq(gethostname(host, sizeof(host) - 1), 0);
	for (char *c = host; *c; c++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_", *c))
			*c = '_';
}

static char *make_dir(void)
{
	static char dir[64];
	snprintf(dir, sizeof(dir), "/tmp/gebpf-pprof-dir-XXXXXX");
	cr_assert(mkdtemp(dir));
	return dir;
}

static void touch(const char *dir, const char *name)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert(fd >= 0);
	close(fd);
}

/* The directory's entries, sorted, joined by spaces. */
static void listing(const char *dir, char *out, size_t len)
{
	struct dirent **v;
	int n = scandir(dir, &v, NULL, alphasort);
	size_t k = 0;

	cr_assert(n >= 0);
	out[0] = 0;
	for (int i = 0; i < n; i++) {
		if (strcmp(v[i]->d_name, ".") && strcmp(v[i]->d_name, ".."))
			k += (size_t)snprintf(out + k, len - k, "%s%s", k ? " " : "", v[i]->d_name);
		free(v[i]);
	}
	free(v);
}

static void remove_dir(const char *dir)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

static struct gb_profile *some_profile(void)
{
	struct gb_profile *p = gb_profile__new(NULL, NULL, false);
	const uint64_t a[] = { 0x1000, 0x2000 };
	cr_assert(p);
	cr_assert_eq(gb_profile__add(p, 5, "x", NULL, 0, a, 2, true), 0);
	return p;
}

static struct gb_pprof_info at(int64_t s)
{
	return (struct gb_pprof_info){ .period_ns = 1001001, .time_ns = s * 1000000000 + 400000000,
				       .duration_ns = 10000000000 };
}

/* 2026-12-05T08:15:00Z */
#define T0 1796458500

Test(pprof_dir, named_by_host_and_utc_start_written_whole, .init = setup_host)
{
	char *dir = make_dir(), want[512], got[1024], path[PATH_MAX];
	struct gb_pprof_dir *d = gb_pprof_dir__new(dir, 0, 0);
	struct gb_profile *p = some_profile();
	struct gb_pprof_info info = at(T0);
	unsigned char magic[2];

	cr_assert(d);
	cr_assert_eq(gb_pprof_dir__write(d, p, &info), 0);
	snprintf(want, sizeof(want), "%s-20261205T081500Z.pb.gz", host);
	listing(dir, got, sizeof(got));
	cr_assert_str_eq(got, want, "only the profile, no temporary file");
	snprintf(path, sizeof(path), "%s/%s", dir, want);
	int fd = open(path, O_RDONLY);
	cr_assert(fd >= 0);
	cr_assert_eq(read(fd, magic, 2), 2);
	close(fd);
	cr_assert(magic[0] == 0x1f && magic[1] == 0x8b, "gzip");
	cr_assert_eq(gb_pprof_dir__count(d), 1);
	gb_profile__free(p);
	gb_pprof_dir__free(d);
	remove_dir(dir);
}

Test(pprof_dir, keep_removes_this_hosts_oldest_only, .init = setup_host)
{
	char *dir = make_dir(), name[512], want[2048], got[2048];
	struct gb_pprof_dir *d = gb_pprof_dir__new(dir, 2, 0);
	struct gb_profile *p = some_profile();

	cr_assert(d);
	snprintf(name, sizeof(name), "%s-20000101T000000Z.pb.gz", host);
	touch(dir, name);
	touch(dir, "otherhost-19990101T000000Z.pb.gz");
	touch(dir, "notes.txt");
	for (int i = 0; i < 3; i++) {
		struct gb_pprof_info info = at(T0 + 10 * i);
		cr_assert_eq(gb_pprof_dir__write(d, p, &info), 0);
	}
	snprintf(want, sizeof(want), "notes.txt otherhost-19990101T000000Z.pb.gz "
		 "%s-20261205T081510Z.pb.gz %s-20261205T081520Z.pb.gz", host, host);
	listing(dir, got, sizeof(got));
	cr_assert_str_eq(got, want);
	gb_profile__free(p);
	gb_pprof_dir__free(d);
	remove_dir(dir);
}

Test(pprof_dir, max_age_removes_old_profiles_of_this_host, .init = setup_host)
{
	char *dir = make_dir(), name[512], want[2048], got[2048];
	struct gb_pprof_dir *d = gb_pprof_dir__new(dir, 0, 3600);
	struct gb_profile *p = some_profile();
	time_t now = time(NULL);
	struct gb_pprof_info info = at(now);
	struct tm tm;
	char stamp[32];

	cr_assert(d);
	snprintf(name, sizeof(name), "%s-20000101T000000Z.pb.gz", host);
	touch(dir, name);
	touch(dir, "otherhost-20000101T000000Z.pb.gz");
	cr_assert_eq(gb_pprof_dir__write(d, p, &info), 0);
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(want, sizeof(want), "otherhost-20000101T000000Z.pb.gz %s-%s.pb.gz", host, stamp);
	listing(dir, got, sizeof(got));
	cr_assert_str_eq(got, want);
	gb_profile__free(p);
	gb_pprof_dir__free(d);
	remove_dir(dir);
}

Test(pprof_dir, unwritable_directory_fails_and_leaves_nothing, .init = setup_host)
{
	struct gb_pprof_dir *d = gb_pprof_dir__new("/proc/self", 0, 0);
	struct gb_profile *p = some_profile();
	struct gb_pprof_info info = at(T0);

	cr_assert(d);
	cr_assert_lt(gb_pprof_dir__write(d, p, &info), 0);
	cr_assert_eq(gb_pprof_dir__count(d), 0);
	gb_profile__free(p);
	gb_pprof_dir__free(d);
}
