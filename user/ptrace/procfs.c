#include "ptrace/procfs.h"

#include <ctype.h>
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

/* /proc/PID/stat into buf, *after at its ")" (the end of the comm field,
 * which may itself hold blanks and parentheses: the last ")" ends it). */
static int read_stat(pid_t pid, char *buf, size_t len, char **after)
{
	int e = slurp(pid, "stat", buf, len);
	if (e)
		return e;
	*after = strrchr(buf, ')');
	return *after ? 0 : -EIO;
}

int gb_proc_stat(pid_t pid, char *state, unsigned long *flags)
{
	char buf[1024], *p;
	int e = read_stat(pid, buf, sizeof(buf), &p);
	if (e)
		return e;
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
	char buf[1024], *p;
	int e = read_stat(pid, buf, sizeof(buf), &p);
	if (e)
		return e;
	if (n < 3)
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

int gb_proc_stat_nums(pid_t pid, uint64_t *out, int n)
{
	char buf[2048], *p;
	int e = read_stat(pid, buf, sizeof(buf), &p);
	if (e)
		return e;
	for (int i = 0; i <= n && i < 4; i++)
		out[i] = 0;
	/* p walks the blanks: the one after ")" starts field 3 (the state). */
	for (int i = 3; i <= n; i++) {
		p = strchr(p, ' ');
		if (!p)
			return -ENOENT;
		p++;
		if (i > 3)
			out[i] = strtoull(p, NULL, 10);
	}
	return 0;
}

/* The last number of an "NSpid:"-style line (the innermost namespace's),
 * and how many it holds. */
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

int gb_proc_fdinfo(pid_t pid, int fd, uint64_t *pos, uint32_t *flags)
{
	char name[64];
	uint8_t *info;
	size_t len;
	snprintf(name, sizeof(name), "fdinfo/%d", fd);
	int r = gb_proc_slurp(pid, name, &info, &len);
	if (r)
		return r;
	const char *p = strstr((char *)info, "pos:");
	if (p)
		*pos = strtoull(p + 4, NULL, 10);
	p = strstr((char *)info, "flags:");
	if (p)
		*flags = (uint32_t)strtoul(p + 6, NULL, 8);
	free(info);
	return 0;
}
