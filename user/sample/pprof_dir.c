/* A directory of one pprof profile per period: pprof_dir.h. */
#include "sample/pprof_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define STAMP_LEN 16               /* YYYYMMDDTHHMMSSZ */
#define SUFFIX ".pb.gz"

struct gb_pprof_dir {
	char *dir;
	char host[HOST_NAME_MAX + 1];  /* only [A-Za-z0-9._-] */
	uint64_t keep;
	double max_age;
	uint64_t written;
};

struct gb_pprof_dir *gb_pprof_dir__new(const char *dir, uint64_t keep, double max_age)
{
	struct gb_pprof_dir *d = calloc(1, sizeof(*d));

	if (!d || !(d->dir = strdup(dir))) {
		free(d);
		gb_err("sample: --pprof-dir %s: %s", dir, strerror(ENOMEM));
		return NULL;
	}
	if (gethostname(d->host, sizeof(d->host) - 1) || !d->host[0])
		snprintf(d->host, sizeof(d->host), "localhost");
	for (char *c = d->host; *c; c++)
		if (!(*c >= 'a' && *c <= 'z') && !(*c >= 'A' && *c <= 'Z') &&
		    !(*c >= '0' && *c <= '9') && *c != '.' && *c != '-' && *c != '_')
			*c = '_';
	d->keep = keep;
	d->max_age = max_age;
	return d;
}

/* name is HOST-STAMP.pb.gz of this host: *t = its time (s since the epoch). */
static bool ours(const struct gb_pprof_dir *d, const char *name, time_t *t)
{
	size_t h = strlen(d->host), n = strlen(name);
	struct tm tm = { 0 };

	if (n != h + 1 + STAMP_LEN + strlen(SUFFIX) || strncmp(name, d->host, h) || name[h] != '-' ||
	    strcmp(name + n - strlen(SUFFIX), SUFFIX))
		return false;
	const char *end = strptime(name + h + 1, "%Y%m%dT%H%M%SZ", &tm);
	if (!end || end != name + h + 1 + STAMP_LEN)
		return false;
	*t = timegm(&tm);
	return true;
}

struct entry {
	char *name;
	time_t t;
};

static int cmp_entry(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	return strcmp(x->name, y->name);   /* the stamps sort as times */
}

/* Remove this host's oldest profiles beyond the bounds. */
static void prune(struct gb_pprof_dir *d, time_t now)
{
	DIR *dir;
	struct dirent *de;
	struct entry *v = NULL;
	size_t n = 0, cap = 0;

	if (!d->keep && !d->max_age)
		return;
	if (!(dir = opendir(d->dir))) {
		gb_warn("sample: --pprof-dir %s: %s: old profiles not removed", d->dir,
			strerror(errno));
		return;
	}
	while ((de = readdir(dir))) {
		time_t t;
		if (!ours(d, de->d_name, &t))
			continue;
		if (n == cap) {
			struct entry *nv = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		if (!(v[n].name = strdup(de->d_name)))
			break;
		v[n++].t = t;
	}
	closedir(dir);
	qsort(v, n, sizeof(*v), cmp_entry);
	for (size_t i = 0; i < n; i++) {
		bool too_many = d->keep && n - i > d->keep;
		/* The newest (the one just written) always stays. */
		bool too_old = d->max_age > 0 && (double)(now - v[i].t) > d->max_age && i + 1 < n;
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/%s", d->dir, v[i].name);
		if ((too_many || too_old) && unlink(path) && errno != ENOENT)
			gb_warn("sample: %s: %s", path, strerror(errno));
		free(v[i].name);
	}
	free(v);
}

int gb_pprof_dir__write(struct gb_pprof_dir *d, const struct gb_profile *p,
			const struct gb_pprof_info *info)
{
	char stamp[STAMP_LEN + 1], path[PATH_MAX], tmp[PATH_MAX];
	time_t start = (time_t)(info->time_ns / 1000000000);
	struct tm tm;
	int fd, err;

	gmtime_r(&start, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(path, sizeof(path), "%s/%s-%s" SUFFIX, d->dir, d->host, stamp);
	snprintf(tmp, sizeof(tmp), "%s/.%s-%s" SUFFIX ".tmp", d->dir, d->host, stamp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		err = -errno;
		gb_err("sample: %s: %s", tmp, strerror(errno));
		return err;
	}
	err = gb_pprof_write(p, info, fd, tmp);
	/* Whole on disk before it has its name. */
	if (!err && fsync(fd)) {
		err = -errno;
		gb_err("sample: %s: fsync: %s", tmp, strerror(errno));
	}
	if (close(fd) && !err) {
		err = -errno;
		gb_err("sample: %s: %s", tmp, strerror(errno));
	}
	if (!err && rename(tmp, path)) {
		err = -errno;
		gb_err("sample: %s: rename to %s: %s", tmp, path, strerror(errno));
	}
	if (err) {
		unlink(tmp);
		return err;
	}
	d->written++;
	gb_info("sample: wrote %s", path);
	prune(d, time(NULL));
	return 0;
}

uint64_t gb_pprof_dir__count(const struct gb_pprof_dir *d)
{
	return d->written;
}

void gb_pprof_dir__free(struct gb_pprof_dir *d)
{
	if (!d)
		return;
	free(d->dir);
	free(d);
}
