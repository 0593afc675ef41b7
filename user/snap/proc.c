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
#include "snap/fdkind.h"

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
		gb_proc_fdinfo(pid, fd, &f->pos, &f->flags);
	}
	closedir(d);
	if (s->nfds)
		qsort(s->fds, s->nfds, sizeof(*s->fds), cmp_fd);
	/* What is behind the ones that are not files (in fd order: a pipe's
	 * bytes go with its first read end) */
	uint64_t *seen = NULL;
	size_t nseen = 0;
	for (size_t i = 0; !r && i < s->nfds; i++)
		r = gb_fdk_capture(pid, &s->fds[i], &seen, &nseen);
	free(seen);
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
	uint64_t stat[20];
	if (gb_proc_stat_nums(pid, stat, 19) == 0)
		s->ps.nice = (int)(int64_t)stat[19];   /* field 19, nice (may be negative) */
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
