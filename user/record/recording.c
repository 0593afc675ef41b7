#include "record/recording.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "common/log.h"
#include "common/version.h"

struct snap_ref {
	uint64_t vt, pc;
	pid_t tid;
	char name[64];
};

struct gb_recording {
	char dir[4096];
	int trace_fd;
	char trace_tmp[4200], trace_final[4200];
	struct snap_ref *snaps;
	size_t nsnaps;
};

static int mkdir_p(const char *path)
{
	char tmp[4300];
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

struct gb_recording *gb_recording__open(const char *dir)
{
	struct gb_recording *r = calloc(1, sizeof(*r));
	char blobs[4200];
	if (!r)
		return NULL;
	r->trace_fd = -1;
	snprintf(r->dir, sizeof(r->dir), "%s", dir);
	snprintf(blobs, sizeof(blobs), "%s/blobs", dir);
	int e = mkdir_p(blobs);
	if (e) {
		gb_err("%s: cannot create the recording directory: %s", dir, strerror(-e));
		free(r);
		return NULL;
	}
	snprintf(r->trace_final, sizeof(r->trace_final), "%s/blobs/trace.jsonl", dir);
	snprintf(r->trace_tmp, sizeof(r->trace_tmp), "%s/blobs/.trace.jsonl.tmp", dir);
	r->trace_fd = open(r->trace_tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (r->trace_fd < 0) {
		gb_err("%s: cannot write: %s", r->trace_tmp, strerror(errno));
		free(r);
		return NULL;
	}
	return r;
}

int gb_recording__trace_fd(struct gb_recording *r) { return r->trace_fd; }

const char *gb_recording__blob_path(const struct gb_recording *r, const char *name, char *buf,
				    size_t len)
{
	snprintf(buf, len, "%s/blobs/%s", r->dir, name);
	return buf;
}

void gb_recording__add_snapshot(struct gb_recording *r, uint64_t vt, uint64_t pc, pid_t tid,
				const char *blob_name)
{
	struct snap_ref *v = realloc(r->snaps, (r->nsnaps + 1) * sizeof(*v));
	if (!v)
		return;
	r->snaps = v;
	struct snap_ref *s = &v[r->nsnaps++];
	s->vt = vt;
	s->pc = pc;
	s->tid = tid;
	snprintf(s->name, sizeof(s->name), "%s", blob_name);
}

static cJSON *hex_or_null(bool has, uint64_t v)
{
	char buf[24];
	if (!has)
		return cJSON_CreateNull();
	int n = gb_fmt_hex(buf, v);
	buf[n] = 0;
	return cJSON_CreateString(buf);
}

static int write_file_atomic(const char *path, const char *data, size_t len)
{
	char tmp[4300];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	size_t done = 0;
	while (done < len) {
		ssize_t w = write(fd, data + done, len - done);
		if (w <= 0) {
			int e = w < 0 ? errno : ENOSPC;
			close(fd);
			unlink(tmp);
			return -e;
		}
		done += (size_t)w;
	}
	if (fsync(fd) || close(fd)) {
		int e = errno;
		unlink(tmp);
		return -e;
	}
	return rename(tmp, path) ? -errno : 0;
}

int gb_recording__finish(struct gb_recording *r, const struct gb_recording_meta *m)
{
	int err = 0;
	if (r->trace_fd >= 0) {
		if (fsync(r->trace_fd) && errno != EINVAL)
			err = -errno;
		close(r->trace_fd);
		r->trace_fd = -1;
		if (rename(r->trace_tmp, r->trace_final) && !err)
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
	cJSON_AddStringToObject(root, "trace_blob", "blobs/trace.jsonl");
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
	char path[4200];
	snprintf(path, sizeof(path), "%s/meta.json", r->dir);
	size_t len = strlen(text);
	text[len] = '\n';
	int e = write_file_atomic(path, text, len + 1);
	free(text);
	return err ? err : e;
}

void gb_recording__free(struct gb_recording *r)
{
	if (!r)
		return;
	if (r->trace_fd >= 0) {
		close(r->trace_fd);
		unlink(r->trace_tmp);
	}
	free(r->snaps);
	free(r);
}
