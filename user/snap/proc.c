#include "snap/proc.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/grow.h"

static int last_field(const char *line, int32_t *out, int *levels)
{
	int n = 0;
	long v = 0;
	const char *p = line;
	while (*p) {
		while (*p && !isdigit((unsigned char)*p))
			p++;
		if (!*p)
			break;
		v = strtol(p, (char **)&p, 10);
		n++;
	}
	if (!n)
		return -EINVAL;
	*out = (int32_t)v;
	if (levels)
		*levels = n;
	return 0;
}

int gb_proc_status(pid_t pid, pid_t tid, struct gb_proc_status *out)
{
	char path[96], line[512];
	memset(out, 0, sizeof(*out));
	out->umask = -1;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (fgets(line, sizeof(line), f)) {
		char *v = strchr(line, ':');
		if (!v)
			continue;
		*v++ = 0;
		unsigned long long x;
		if (!strcmp(line, "State"))
			sscanf(v, " %c", &out->state);
		else if (!strcmp(line, "NSpid"))
			last_field(v, &out->nspid, &out->levels);
		else if (!strcmp(line, "NSpgid"))
			last_field(v, &out->nspgid, NULL);
		else if (!strcmp(line, "NSsid"))
			last_field(v, &out->nssid, NULL);
		else if (!strcmp(line, "PPid"))
			out->ppid = (pid_t)atoi(v);
		else if (!strcmp(line, "Uid"))
			out->uid = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(line, "Gid"))
			out->gid = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(line, "Seccomp"))
			out->seccomp = atoi(v);
		else if (!strcmp(line, "SigPnd") && sscanf(v, "%llx", &x) == 1)
			out->sigpnd = x;
		else if (!strcmp(line, "ShdPnd") && sscanf(v, "%llx", &x) == 1)
			out->shdpnd = x;
		else if (!strcmp(line, "SigBlk") && sscanf(v, "%llx", &x) == 1)
			out->sigblk = x;
		else if (!strcmp(line, "SigIgn") && sscanf(v, "%llx", &x) == 1)
			out->sigign = x;
		else if (!strcmp(line, "SigCgt") && sscanf(v, "%llx", &x) == 1)
			out->sigcgt = x;
		else if (!strcmp(line, "Umask") && sscanf(v, "%llo", &x) == 1)
			out->umask = (int32_t)x;
	}
	fclose(f);
	return out->levels ? 0 : -ESRCH;
}

int gb_proc_slurp(pid_t pid, const char *name, uint8_t **buf, size_t *len)
{
	char path[96];
	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	*buf = NULL;
	*len = 0;
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	size_t cap = 0, n = 0;
	uint8_t *b = NULL;
	int r = 0;
	for (;;) {
		/* Room for at least one more byte and the final NUL. */
		if (GB_GROW(&b, &cap, n + 2)) {
			r = -ENOMEM;
			break;
		}
		ssize_t k = read(fd, b + n, cap - 1 - n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (k == 0)
			break;
		n += (size_t)k;
	}
	close(fd);
	if (r) {
		free(b);
		return r;
	}
	b[n] = 0;
	*buf = b;
	*len = n;
	return 0;
}

static int cmp_fd(const void *a, const void *b)
{
	const struct gb_snap_fd *x = a, *y = b;
	return (x->fd > y->fd) - (x->fd < y->fd);
}

static int read_fds(pid_t pid, struct gb_snapshot *s)
{
	char path[96];
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	DIR *d = opendir(path);
	if (!d)
		return errno == ENOENT ? -ESRCH : -errno;
	struct dirent *de;
	size_t cap = 0;
	int r = 0;
	while ((de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		int fd = atoi(de->d_name);
		char link[PATH_MAX], lp[128];
		snprintf(lp, sizeof(lp), "/proc/%d/fd/%d", pid, fd);
		ssize_t n = readlink(lp, link, sizeof(link) - 1);
		if (n < 0)
			continue; /* closed meanwhile */
		link[n] = 0;
		if (GB_GROW(&s->fds, &cap, s->nfds + 1)) {
			r = -ENOMEM;
			break;
		}
		struct gb_snap_fd *f = &s->fds[s->nfds++];
		memset(f, 0, sizeof(*f));
		f->fd = fd;
		f->target = strdup(link);
		char name[64];
		uint8_t *info;
		size_t len;
		snprintf(name, sizeof(name), "fdinfo/%d", fd);
		if (gb_proc_slurp(pid, name, &info, &len) == 0) {
			const char *p = strstr((char *)info, "pos:");
			if (p)
				f->pos = strtoull(p + 4, NULL, 10);
			p = strstr((char *)info, "flags:");
			if (p)
				f->flags = (uint32_t)strtoul(p + 6, NULL, 8);
			free(info);
		}
	}
	closedir(d);
	if (s->nfds)
		qsort(s->fds, s->nfds, sizeof(*s->fds), cmp_fd);
	return r;
}

/* The parent's pid as the process sees it: 0 when the parent is outside
 * the process's pid namespace (as the kernel reports it there). */
static int32_t ns_ppid(pid_t ppid, int levels)
{
	struct gb_proc_status ps;
	if (ppid <= 0 || gb_proc_status(ppid, ppid, &ps) || ps.levels != levels)
		return 0;
	return ps.nspid;
}

static int fill_psinfo(pid_t pid, struct gb_snapshot *s)
{
	struct gb_proc_status st;
	int r = gb_proc_status(pid, pid, &st);
	if (r)
		return r;
	s->meta.pid = st.nspid;
	s->ps.state = st.state;
	s->ps.uid = st.uid;
	s->ps.gid = st.gid;
	s->ps.ppid = ns_ppid(st.ppid, st.levels);
	s->ps.pgrp = st.nspgid;
	s->ps.sid = st.nssid;

	uint8_t *b;
	size_t len;
	if (gb_proc_slurp(pid, "stat", &b, &len) == 0) {
		/* ") S ppid pgrp sid tty tpgid flags minflt cminflt majflt cmajflt
		 *  utime stime cutime cstime priority nice" */
		char *p = strrchr((char *)b, ')');
		long nice;
		if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %ld",
				&nice) == 1)
			s->ps.nice = (int)nice;
		free(b);
	}
	if (gb_proc_slurp(pid, "comm", &b, &len) == 0) {
		b[strcspn((char *)b, "\n")] = 0;
		strncpy(s->ps.fname, (char *)b, sizeof(s->ps.fname) - 1);
		free(b);
	}
	if (gb_proc_slurp(pid, "cmdline", &b, &len) == 0) {
		size_t n = len < sizeof(s->ps.psargs) - 1 ? len : sizeof(s->ps.psargs) - 1;
		for (size_t i = 0; i < n; i++)
			s->ps.psargs[i] = b[i] ? (char)b[i] : ' ';
		while (n && s->ps.psargs[n - 1] == ' ')
			s->ps.psargs[--n] = 0;
		free(b);
	}
	return 0;
}

int gb_proc_fill(pid_t pid, struct gb_snapshot *s)
{
	char path[96], link[PATH_MAX];
	int r = fill_psinfo(pid, s);
	if (r)
		return r;
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n >= 0) {
		link[n] = 0;
		s->exe = strdup(link);
	}
	r = gb_proc_slurp(pid, "auxv", &s->auxv, &s->auxv_len);
	if (r)
		return r;
	return read_fds(pid, s);
}
