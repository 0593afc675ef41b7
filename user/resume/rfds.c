/* The snapshot's file descriptors in the new process (docs/resume.md, "Files"):
 * regular files and directories reopened at their fd numbers with their open
 * flags and offsets; 0, 1 and 2 are the caller's; the kernel objects
 * rfdkind.c makes again (pipes, eventfds, timerfds, signalfds, epolls);
 * anything else (network sockets, a pipe or unix socket whose other end is
 * elsewhere, devices,
 * deleted files) becomes /dev/null with one warning each. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "resume/resume_int.h"
#include "snap/fdkind.h"

static bool reopenable(const char *target)
{
	struct stat st;
	if (target[0] != '/' || strstr(target, " (deleted)") || stat(target, &st))
		return false;
	return S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || !strcmp(target, "/dev/null");
}

static bool in_snapshot(const struct gb_snapshot *s, int fd)
{
	for (size_t i = 0; i < s->nfds; i++)
		if (s->fds[i].fd == fd)
			return true;
	return false;
}

/* Close what the helper has open that the snapshot does not (0-2 stay). */
static void close_extra(struct gb_rctx *c, const struct gb_snapshot *s)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", c->pid);
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		int fd = atoi(de->d_name);
		if (de->d_name[0] != '.' && fd > 2 && !in_snapshot(s, fd))
			gb_rsys(c, SYS_close, (uint64_t)fd, 0, 0, 0, 0, 0);
	}
	closedir(d);
}

static int reopen(struct gb_rctx *c, const struct gb_snap_fd *f)
{
	bool as_file = reopenable(f->target);
	const char *path = as_file ? f->target : "/dev/null";
	uint32_t flags = as_file ? f->flags & ~(uint32_t)(O_CREAT | O_TRUNC | O_EXCL | O_NOCTTY) : O_RDWR;
	if (!as_file && f->k && (f->k->kind == GB_FDK_PIPE || f->k->kind == GB_FDK_UNIX))
		gb_warn("resume: fd %d (%s): a %s whose other end is not in the process; replaced "
			"by /dev/null (--fd %d=PATH or %d=close to choose)", f->fd, f->target,
			f->k->kind == GB_FDK_PIPE ? "pipe" : "unix socket", f->fd, f->fd);
	else if (!as_file)
		gb_warn("resume: fd %d (%s): not a file that can be reopened; replaced by /dev/null "
			"(--fd %d=PATH or %d=close to choose)", f->fd, f->target, f->fd, f->fd);
	uint64_t a = gb_rput(c, 0, path, strlen(path) + 1);
	long fd = a ? gb_rsys(c, SYS_openat, (uint64_t)AT_FDCWD, a, flags, 0, 0, 0) : -EFAULT;
	if (fd < 0) {
		return gb_resume__fail(c, (int)fd, "fd %d: reopen %s: %s", f->fd, path,
				       strerror((int)-fd));
	}
	if (fd != f->fd) {
		long r = gb_rsys(c, SYS_dup3, (uint64_t)fd, (uint64_t)f->fd, f->flags & O_CLOEXEC, 0, 0, 0);
		gb_rsys(c, SYS_close, (uint64_t)fd, 0, 0, 0, 0, 0);
		if (r < 0) {
			return gb_resume__fail(c, (int)r, "fd %d: dup3: %s", f->fd, strerror((int)-r));
		}
	}
	if (as_file && f->pos) {
		long r = gb_rsys(c, SYS_lseek, (uint64_t)f->fd, f->pos, SEEK_SET, 0, 0, 0);
		if (r < 0)
			gb_warn("resume: fd %d (%s): cannot seek to %llu: %s", f->fd, f->target,
				(unsigned long long)f->pos, strerror((int)-r));
	}
	return 0;
}

const struct gb_fd_choice *gb_resume__choice(const struct gb_rctx *c, int fd)
{
	for (size_t i = 0; i < c->nchoice; i++)
		if (c->choice[i].fd == fd)
			return &c->choice[i];
	return NULL;
}

/* The user's choice for f (--fd N=close|PATH): closed, or PATH opened there
 * with f's access mode (created when it is written), its O_CLOEXEC. */
static int chosen(struct gb_rctx *c, const struct gb_snap_fd *f, const struct gb_fd_choice *ch)
{
	gb_rsys(c, SYS_close, (uint64_t)f->fd, 0, 0, 0, 0, 0);
	if (!ch->path)
		return 0;
	uint32_t acc = f->flags & O_ACCMODE;
	uint32_t flags = acc | (acc != O_RDONLY ? O_CREAT : 0) | (f->flags & (O_APPEND | O_NONBLOCK));
	uint64_t a = gb_rput(c, 0, ch->path, strlen(ch->path) + 1);
	long fd = a ? gb_rsys(c, SYS_openat, (uint64_t)AT_FDCWD, a, flags, 0644, 0, 0) : -EFAULT;
	if (fd < 0)
		return gb_resume__fail(c, (int)fd, "--fd %d=%s: %s", f->fd, ch->path, strerror((int)-fd));
	if (fd != f->fd) {
		long r = gb_rsys(c, SYS_dup3, (uint64_t)fd, (uint64_t)f->fd, f->flags & O_CLOEXEC, 0, 0, 0);
		gb_rsys(c, SYS_close, (uint64_t)fd, 0, 0, 0, 0, 0);
		if (r < 0)
			return gb_resume__fail(c, (int)r, "--fd %d=%s: dup3: %s", f->fd, ch->path,
					       strerror((int)-r));
	}
	return 0;
}

int gb_resume__fds(struct gb_rctx *c, const struct gb_snapshot *s)
{
	close_extra(c, s);
	for (size_t i = 0; i < s->nfds; i++) {
		const struct gb_fd_choice *ch = s->fds[i].fd > 2 ? gb_resume__choice(c, s->fds[i].fd) : NULL;
		if (ch) {
			int e = chosen(c, &s->fds[i], ch);
			if (e)
				return e;
			continue;
		}
		if (s->fds[i].fd <= 2 || gb_resume__fd_made(s, &s->fds[i]))
			continue;
		int e = reopen(c, &s->fds[i]);
		if (e)
			return e;
	}
	return gb_resume__fd_kinds(c, s);
}
