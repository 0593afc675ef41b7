#include "ptrace/procfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/grow.h"

/* Read a small /proc file into buf (NUL-terminated). */
static int slurp(pid_t pid, const char *what, char *buf, size_t len)
{
	char path[64];
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/%s", pid, what);
	else
		snprintf(path, sizeof(path), "/proc/self/%s", what); /* gebpf itself */
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	ssize_t n = read(fd, buf, len - 1);
	int e = errno;
	close(fd);
	if (n < 0)
		return e == ESRCH ? -ESRCH : -e;
	buf[n] = 0;
	return 0;
}

int gb_proc_status_field(pid_t pid, const char *name, char *val, size_t len)
{
	char buf[8192];
	int e = slurp(pid, "status", buf, sizeof(buf));
	if (e)
		return e;
	size_t nl = strlen(name);
	for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		if (strncmp(line, name, nl) || line[nl] != ':')
			continue;
		char *v = line + nl + 1;
		v += strspn(v, " \t");
		size_t l = strcspn(v, "\n");
		while (l && (v[l - 1] == ' ' || v[l - 1] == '\t'))
			l--;
		if (l >= len)
			l = len - 1;
		memcpy(val, v, l);
		val[l] = 0;
		return 0;
	}
	return -ENOENT;
}

int gb_proc_status_num(pid_t pid, const char *name, int base, uint64_t *out)
{
	char v[64], *end;
	int e = gb_proc_status_field(pid, name, v, sizeof(v));
	if (e)
		return e;
	errno = 0;
	*out = strtoull(v, &end, base);
	return errno || end == v ? -EINVAL : 0;
}

int gb_proc_seccomp(pid_t tid, int *mode, int *nfilters)
{
	uint64_t v;
	int e = gb_proc_status_num(tid, "Seccomp", 10, &v);
	if (e && e != -ENOENT)
		return e;
	*mode = e ? 0 : (int)v;
	e = gb_proc_status_num(tid, "Seccomp_filters", 10, &v);
	if (e && e != -ENOENT)
		return e;
	*nfilters = e ? -1 : (int)v;
	return 0;
}

int gb_proc_stat(pid_t pid, char *state, unsigned long *flags)
{
	char buf[1024];
	int e = slurp(pid, "stat", buf, sizeof(buf));
	if (e)
		return e;
	char *p = strrchr(buf, ')');
	if (!p)
		return -EIO;
	/* ") S ppid pgrp session tty tpgid flags" */
	int ppid, pgrp, session, tty, tpgid;
	unsigned long fl;
	if (sscanf(p + 2, "%c %d %d %d %d %d %lu", state, &ppid, &pgrp, &session, &tty, &tpgid, &fl) != 7)
		return -EIO;
	if (flags)
		*flags = fl;
	return 0;
}

int gb_proc_stat_num(pid_t pid, int n, uint64_t *out)
{
	char buf[1024];
	int e = slurp(pid, "stat", buf, sizeof(buf));
	if (e)
		return e;
	char *p = strrchr(buf, ')');
	if (!p || n < 3)
		return -EIO;
	/* field 3 (the state) starts after ") " */
	p += 2;
	for (int f = 3; f < n; f++) {
		p = strchr(p, ' ');
		if (!p)
			return -ENOENT;
		p++;
	}
	char *end;
	errno = 0;
	*out = strtoull(p, &end, 10);
	return errno || end == p ? -EINVAL : 0;
}

bool gb_proc_gone(pid_t pid)
{
	char st;
	int e = gb_proc_stat(pid, &st, NULL);
	return e == -ESRCH || (!e && (st == 'Z' || st == 'X'));
}

int gb_proc_tasks(pid_t pid, pid_t **tids, size_t *n)
{
	char path[64];
	size_t cap = 0;
	int r = 0;
	*tids = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	DIR *d = opendir(path);
	if (!d)
		return -ESRCH;
	struct dirent *de;
	while ((de = readdir(d))) {
		pid_t tid = atoi(de->d_name);
		if (tid <= 0)
			continue;
		if (GB_GROW(tids, &cap, *n + 1)) {
			r = -ENOMEM;
			break;
		}
		(*tids)[(*n)++] = tid;
	}
	closedir(d);
	if (r) {
		free(*tids);
		*tids = NULL;
		*n = 0;
	}
	return r;
}
