#include "record/recording.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "common/grow.h"
#include "common/log.h"
#include "common/version.h"
#include "record/numfmt.h"

#define TRACE_TMP ".trace.jsonl.tmp"
#define META_TMP ".meta.json.tmp"

struct snap_ref {
	uint64_t vt, pc;
	pid_t tid;
	char name[64];
};

struct gb_recording {
	char dir[4096];             /* for messages */
	int dfd, bfd;               /* DIR, DIR/blobs */
	int trace_fd;
	const char *trace_name;     /* blobs/<this> once finished */
	struct snap_ref *snaps;
	size_t nsnaps, cap;
};

/* Parents of path, as mkdir -p (they are ordinary directories on the way). */
static int mkdir_parents(const char *path)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

/* Names gebpf writes into a recording: what --force may remove. */
static bool ours_top(const char *n)
{
	return !strcmp(n, "meta.json") || !strcmp(n, META_TMP) || !strcmp(n, "blobs");
}

static bool ours_blob(const char *n)
{
	size_t l = strlen(n);
	if (!strcmp(n, "trace.jsonl") || !strcmp(n, "trace.jsonl.zst") || !strcmp(n, TRACE_TMP))
		return true;
	/* snap-<vt>.core, and the snapshot writer's snap-<vt>.core.tmp.XXXXXX */
	if (strncmp(n, "snap-", 5) || l < 10)
		return false;
	size_t i = 5;
	while (n[i] >= '0' && n[i] <= '9')
		i++;
	return i > 5 && (!strcmp(n + i, ".core") || !strncmp(n + i, ".core.tmp.", 10));
}

/* Each entry of directory fd d: cb(d, name) (stops on a non-zero return).
 * Returns that value, 0, or -errno. */
static int each_entry(int d, int (*cb)(int d, const char *name, void *ctx), void *ctx)
{
	int dup_fd = openat(d, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!dir) {
		int e = -errno;
		if (dup_fd >= 0)
			close(dup_fd);
		return e;
	}
	int r = 0;
	struct dirent *de;
	while (!r && (de = readdir(dir)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			r = cb(d, de->d_name, ctx);
	closedir(dir);
	return r;
}

struct clear {
	bool dry;             /* first pass: only look for files that are not ours */
	char first[256];      /* the first entry seen / not ours */
};

static int any_entry(int d, const char *name, void *ctx)
{
	struct clear *c = ctx;
	snprintf(c->first, sizeof(c->first), "%s", name);
	return 1;
}

static int clear_blob(int d, const char *name, void *ctx)
{
	struct clear *c = ctx;
	if (!ours_blob(name)) {
		snprintf(c->first, sizeof(c->first), "blobs/%s", name);
		return 1;
	}
	return c->dry || !unlinkat(d, name, 0) ? 0 : -errno;
}

static int clear_top(int d, const char *name, void *ctx)
{
	struct clear *c = ctx;
	if (!ours_top(name)) {
		snprintf(c->first, sizeof(c->first), "%s", name);
		return 1;
	}
	if (strcmp(name, "blobs"))
		return c->dry || !unlinkat(d, name, 0) ? 0 : -errno;
	int b = openat(d, "blobs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (b < 0)
		return -errno;
	int r = each_entry(b, clear_blob, ctx);
	close(b);
	if (r || c->dry)
		return r;
	return unlinkat(d, "blobs", AT_REMOVEDIR) ? -errno : 0;
}

/* DIR as found: refuse what is not ours to write into; with force, clear
 * gebpf's own files.  0, or -1 with the reason printed. */
static int check_dir(struct gb_recording *r, bool force)
{
	struct stat st;
	struct clear c = { .dry = true };
	if (fstat(r->dfd, &st))
		return gb_err("%s: %s", r->dir, strerror(errno)), -1;
	int full = each_entry(r->dfd, any_entry, &c);
	if (full < 0)
		return gb_err("%s: cannot list: %s", r->dir, strerror(-full)), -1;
	if (st.st_uid != geteuid() && full) {
		gb_err("%s: owned by uid %u, not by the user running gebpf (uid %u), and not empty: "
		       "give an empty directory or one of your own", r->dir, (unsigned)st.st_uid,
		       (unsigned)geteuid());
		return -1;
	}
	if (!full)
		return 0;
	if (!force) {
		gb_err("%s: not empty (it holds '%s'): give --force to replace an earlier recording, "
		       "or an empty directory", r->dir, c.first);
		return -1;
	}
	int e = each_entry(r->dfd, clear_top, &c); /* dry: is everything ours? */
	if (!e) {
		c.dry = false;
		e = each_entry(r->dfd, clear_top, &c);
	}
	if (e > 0) {
		gb_err("%s: holds '%s', which gebpf did not write: not replacing this directory",
		       r->dir, c.first);
		return -1;
	}
	if (e < 0)
		return gb_err("%s: cannot clear the earlier recording: %s", r->dir, strerror(-e)), -1;
	return 0;
}

static int open_dirs(struct gb_recording *r, bool force)
{
	int e = mkdir_parents(r->dir);
	if (!e && mkdir(r->dir, 0755) && errno != EEXIST)
		e = -errno;
	if (e)
		return gb_err("%s: cannot create the recording directory: %s", r->dir, strerror(-e)), -1;
	r->dfd = open(r->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (r->dfd < 0) {
		gb_err("%s: cannot open the recording directory: %s", r->dir,
		       errno == ELOOP ? "it is a symbolic link (give the directory it points to)"
				      : strerror(errno));
		return -1;
	}
	if (check_dir(r, force))
		return -1;
	if (mkdirat(r->dfd, "blobs", 0755) ||
	    (r->bfd = openat(r->dfd, "blobs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return gb_err("%s/blobs: cannot create: %s", r->dir, strerror(errno)), -1;
	return 0;
}

struct gb_recording *gb_recording__open(const char *dir, bool force)
{
	struct gb_recording *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->dfd = r->bfd = r->trace_fd = -1;
	r->trace_name = "trace.jsonl";
	snprintf(r->dir, sizeof(r->dir), "%s", dir);
	if (open_dirs(r, force))
		goto fail;
	r->trace_fd = openat(r->bfd, TRACE_TMP, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			     0644);
	if (r->trace_fd < 0) {
		gb_err("%s/blobs/%s: cannot write: %s", dir, TRACE_TMP, strerror(errno));
		goto fail;
	}
	return r;
fail:
	gb_recording__free(r);
	return NULL;
}

int gb_recording__trace_fd(struct gb_recording *r) { return r->trace_fd; }

const char *gb_recording__blob_path(const struct gb_recording *r, const char *name, char *buf,
				    size_t len)
{
	snprintf(buf, len, "/proc/self/fd/%d/%s", r->bfd, name);
	return buf;
}

int gb_recording__add_snapshot(struct gb_recording *r, uint64_t vt, uint64_t pc, pid_t tid,
			       const char *blob_name)
{
	if (GB_GROW(&r->snaps, &r->cap, r->nsnaps + 1))
		return -ENOMEM;
	struct snap_ref *s = &r->snaps[r->nsnaps++];
	s->vt = vt;
	s->pc = pc;
	s->tid = tid;
	snprintf(s->name, sizeof(s->name), "%s", blob_name);
	return 0;
}

static cJSON *hex_or_null(bool has, uint64_t v)
{
	char buf[24];
	if (!has)
		return cJSON_CreateNull();
	int n = gb_numfmt_hex(buf, v);
	buf[n] = 0;
	return cJSON_CreateString(buf);
}

/* DIR/meta.json: written under a temporary name, then renamed. */
static int write_meta(struct gb_recording *r, const char *data, size_t len)
{
	unlinkat(r->dfd, META_TMP, 0);
	int fd = openat(r->dfd, META_TMP, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	size_t done = 0;
	while (done < len) {
		ssize_t w = write(fd, data + done, len - done);
		if (w <= 0) {
			int e = w < 0 ? errno : ENOSPC;
			close(fd);
			unlinkat(r->dfd, META_TMP, 0);
			return -e;
		}
		done += (size_t)w;
	}
	if (fsync(fd) || close(fd)) {
		int e = errno;
		unlinkat(r->dfd, META_TMP, 0);
		return -e;
	}
	return renameat(r->dfd, META_TMP, r->dfd, "meta.json") ? -errno : 0;
}

int gb_recording__finish(struct gb_recording *r, const struct gb_recording_meta *m)
{
	int err = 0;
	if (r->trace_fd >= 0) {
		if (fsync(r->trace_fd) && errno != EINVAL)
			err = -errno;
		close(r->trace_fd);
		r->trace_fd = -1;
		if (renameat(r->bfd, TRACE_TMP, r->bfd, r->trace_name) && !err)
			err = -errno;
	}
	cJSON *root = cJSON_CreateObject();
	struct utsname u;
	uname(&u);
	if (m->argv) {
		cJSON *cmd = cJSON_AddArrayToObject(root, "command");
		for (char *const *a = m->argv; *a; a++)
			cJSON_AddItemToArray(cmd, cJSON_CreateString(*a));
	} else {
		cJSON_AddNullToObject(root, "command");
	}
	cJSON_AddNumberToObject(root, "pid", m->pid);
	cJSON_AddStringToObject(root, "kernel", u.release);
	cJSON_AddStringToObject(root, "gebpf", GB_VERSION);
	cJSON *tr = cJSON_AddObjectToObject(root, "trace");
	cJSON_AddBoolToObject(tr, "exec", m->trace->exec);
	cJSON_AddItemToObject(tr, "start", hex_or_null(m->trace->has_start, m->trace->start));
	cJSON_AddItemToObject(tr, "end", hex_or_null(m->trace->has_end, m->trace->end));
	cJSON_AddNumberToObject(tr, "max_events", (double)m->max_events);
	cJSON_AddNumberToObject(tr, "insns", (double)m->counts->insns);
	cJSON_AddNumberToObject(tr, "read", (double)m->counts->reads);
	cJSON_AddNumberToObject(tr, "write", (double)m->counts->writes);
	cJSON_AddNumberToObject(tr, "events", (double)m->counts->events);
	cJSON_AddNumberToObject(tr, "dropped", (double)m->counts->dropped);
	if (m->trace->faults)
		cJSON_AddNumberToObject(tr, "faults", (double)m->counts->faults);
	cJSON_AddStringToObject(tr, "end_reason", m->end_reason ? m->end_reason : "");
	if (m->exit_status >= 0)
		cJSON_AddNumberToObject(root, "exit_status", m->exit_status);
	char blob[64];
	snprintf(blob, sizeof(blob), "blobs/%s", r->trace_name);
	cJSON_AddStringToObject(root, "trace_blob", blob);
	cJSON *snaps = cJSON_AddArrayToObject(root, "snapshots");
	for (size_t i = 0; i < r->nsnaps; i++) {
		cJSON *s = cJSON_CreateObject();
		char rel[128];
		cJSON_AddNumberToObject(s, "vt", (double)r->snaps[i].vt);
		cJSON_AddItemToObject(s, "pc", hex_or_null(true, r->snaps[i].pc));
		cJSON_AddNumberToObject(s, "tid", r->snaps[i].tid);
		snprintf(rel, sizeof(rel), "blobs/%s", r->snaps[i].name);
		cJSON_AddStringToObject(s, "blob", rel);
		cJSON_AddItemToArray(snaps, s);
	}
	char *text = cJSON_Print(root);
	cJSON_Delete(root);
	if (!text)
		return -ENOMEM;
	size_t len = strlen(text);
	text[len] = '\n';
	int e = write_meta(r, text, len + 1);
	free(text);
	return err ? err : e;
}

void gb_recording__set_zstd(struct gb_recording *r, bool zstd)
{
	r->trace_name = zstd ? "trace.jsonl.zst" : "trace.jsonl";
}

void gb_recording__free(struct gb_recording *r)
{
	if (!r)
		return;
	if (r->trace_fd >= 0) {
		close(r->trace_fd);
		unlinkat(r->bfd, TRACE_TMP, 0);
	}
	if (r->bfd >= 0)
		close(r->bfd);
	if (r->dfd >= 0)
		close(r->dfd);
	free(r->snaps);
	free(r);
}
