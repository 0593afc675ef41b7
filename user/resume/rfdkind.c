/* The snapshot's fds that are kernel objects, made again in the new process
 * (docs/resume.md "Files"; what each holds: snap/fdkind.h): pipes and unix
 * socket pairs whose two ends the process held (with the bytes they held),
 * eventfds, timerfds,
 * signalfds, then epoll instances with their interest lists (their
 * targets in place by then).  Each object is made at a free fd above every
 * fd of the snapshot (the lowest free one may be another's number), then
 * dup3'd to its numbers with their O_CLOEXEC, and O_NONBLOCK set on each. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "ptrace/mem.h"
#include "resume/resume_int.h"
#include "snap/fdkind.h"

/* The first fd number no fd of the snapshot has. */
static int above_all(const struct gb_snapshot *s)
{
	int hi = 2;
	for (size_t i = 0; i < s->nfds; i++)
		hi = s->fds[i].fd > hi ? s->fds[i].fd : hi;
	return hi + 1;
}

/* fd (just made) moved to a free number >= floor; the new number or -errno. */
static long park(struct gb_rctx *c, long fd, int floor)
{
	if (fd < 0)
		return fd;
	long p = gb_rsys(c, SYS_fcntl, (uint64_t)fd, F_DUPFD_CLOEXEC, (uint64_t)floor, 0, 0, 0);
	gb_rsys(c, SYS_close, (uint64_t)fd, 0, 0, 0, 0, 0);
	return p;
}

/* Object p (parked) at f's number, with f's O_CLOEXEC and O_NONBLOCK
 * (unless the user chose otherwise for it: --fd, rfds.c). */
static int place(struct gb_rctx *c, long p, const struct gb_snap_fd *f)
{
	if (gb_resume__choice(c, f->fd))
		return 0;
	long r = gb_rsys(c, SYS_dup3, (uint64_t)p, (uint64_t)f->fd, f->flags & O_CLOEXEC, 0, 0, 0);
	if (r < 0)
		return gb_resume__fail(c, (int)r, "fd %d (%s): dup3: %s", f->fd, f->target,
				       strerror((int)-r));
	long fl = gb_rsys(c, SYS_fcntl, (uint64_t)f->fd, F_GETFL, 0, 0, 0, 0);
	if (fl >= 0 && ((uint32_t)fl & O_NONBLOCK) != (f->flags & O_NONBLOCK))
		gb_rsys(c, SYS_fcntl, (uint64_t)f->fd, F_SETFL,
			((uint64_t)fl & ~(uint64_t)O_NONBLOCK) | (f->flags & O_NONBLOCK), 0, 0, 0);
	return 0;
}

/* A pipe of which the process held both ends (by inode). */
bool gb_resume__pipe_whole(const struct gb_snapshot *s, uint64_t ino)
{
	bool rd = false, wr = false;
	for (size_t i = 0; i < s->nfds; i++) {
		const struct gb_snap_fd *f = &s->fds[i];
		if (!f->k || f->k->kind != GB_FDK_PIPE || f->k->ino != ino)
			continue;
		rd |= (f->flags & O_ACCMODE) == O_RDONLY;
		wr |= (f->flags & O_ACCMODE) == O_WRONLY;
	}
	return rd && wr;
}

static const struct gb_snap_fd *unix_end(const struct gb_snapshot *s, uint64_t ino)
{
	for (size_t i = 0; ino && i < s->nfds; i++)
		if (s->fds[i].k && s->fds[i].k->kind == GB_FDK_UNIX && s->fds[i].k->ino == ino)
			return &s->fds[i];
	return NULL;
}

bool gb_resume__fd_made(const struct gb_snapshot *s, const struct gb_snap_fd *f)
{
	if (!f->k)
		return false;
	if (f->k->kind == GB_FDK_UNIX)
		return unix_end(s, f->k->peer) != NULL;
	return f->k->kind != GB_FDK_PIPE || gb_resume__pipe_whole(s, f->k->ino);
}

/* len bytes written to fd w (parked) of the new process. */
static int put_bytes(struct gb_rctx *c, long w, const uint8_t *b, size_t len)
{
	for (size_t off = 0; off < len;) {
		size_t n = len - off < GB_RSCRATCH_LEN ? len - off : GB_RSCRATCH_LEN;
		uint64_t at = gb_rput(c, 0, b + off, n);
		long r = at ? gb_rsys(c, SYS_write, (uint64_t)w, at, n, 0, 0, 0) : -EFAULT;
		if (r <= 0)
			return r < 0 ? (int)r : -EIO;
		off += (size_t)r;
	}
	return 0;
}

/* A unix socket pair both of whose ends the process held: made with the
 * first fd of either end; each end's received bytes written to the other. */
static int make_unix(struct gb_rctx *c, const struct gb_snapshot *s, size_t i, int floor)
{
	const struct gb_snap_fdk *k = s->fds[i].k;
	for (size_t j = 0; j < i; j++)
		if (s->fds[j].k && s->fds[j].k->kind == GB_FDK_UNIX &&
		    (s->fds[j].k->ino == k->ino || s->fds[j].k->ino == k->peer) &&
		    !gb_resume__choice(c, s->fds[j].fd))
			return 0;
	int zero[2] = { -1, -1 }, sv[2];
	uint64_t a = gb_rput(c, 0, zero, sizeof(zero));
	long r = a ? gb_rsys(c, SYS_socketpair, AF_UNIX, (uint64_t)k->type | SOCK_CLOEXEC, 0, a, 0, 0)
		   : -EFAULT;
	if (r < 0 || gb_mem_read(c->pid, a, sv, sizeof(sv)) != sizeof(sv))
		return gb_resume__fail(c, r < 0 ? (int)r : -EFAULT, "fd %d (%s): socketpair: %s",
				       s->fds[i].fd, s->fds[i].target, strerror(r < 0 ? (int)-r : EFAULT));
	long end[2] = { park(c, sv[0], floor), park(c, sv[1], floor) };
	uint64_t ino[2] = { k->ino, k->peer };
	for (int e = 0; e < 2; e++) {
		const struct gb_snap_fd *f = unix_end(s, ino[e]);
		if (f && f->k->nbytes) {
			int w = put_bytes(c, end[!e], f->k->bytes, f->k->nbytes);
			if (w)
				gb_warn("resume: fd %d (%s): its %zu received bytes not put back: %s",
					f->fd, f->target, f->k->nbytes, strerror(-w));
		}
	}
	for (size_t j = i; j < s->nfds; j++) {
		const struct gb_snap_fd *f = &s->fds[j];
		if (!f->k || f->k->kind != GB_FDK_UNIX || (f->k->ino != ino[0] && f->k->ino != ino[1]))
			continue;
		int e = place(c, end[f->k->ino == ino[1]], f);
		if (e)
			return e;
	}
	gb_rsys(c, SYS_close, (uint64_t)end[0], 0, 0, 0, 0, 0);
	gb_rsys(c, SYS_close, (uint64_t)end[1], 0, 0, 0, 0, 0);
	return 0;
}

static int make_pipe(struct gb_rctx *c, const struct gb_snapshot *s, size_t i, int floor)
{
	const struct gb_snap_fdk *k = s->fds[i].k;
	for (size_t j = 0; j < i; j++) /* (made with the first of its fds the user left to it) */
		if (s->fds[j].k && s->fds[j].k->kind == GB_FDK_PIPE && s->fds[j].k->ino == k->ino &&
		    !gb_resume__choice(c, s->fds[j].fd))
			return 0;
	int zero[2] = { -1, -1 }, p[2];
	uint64_t a = gb_rput(c, 0, zero, sizeof(zero));
	long r = a ? gb_rsys(c, SYS_pipe2, a, O_CLOEXEC, 0, 0, 0, 0) : -EFAULT;
	if (r < 0 || gb_mem_read(c->pid, a, p, sizeof(p)) != sizeof(p))
		return gb_resume__fail(c, r < 0 ? (int)r : -EFAULT, "fd %d (%s): pipe2: %s",
				       s->fds[i].fd, s->fds[i].target, strerror(r < 0 ? (int)-r : EFAULT));
	long rd = park(c, p[0], floor), wr = park(c, p[1], floor);
	const struct gb_snap_fdk *b = NULL; /* the fd that carries its bytes */
	for (size_t j = i; j < s->nfds; j++)
		if (s->fds[j].k && s->fds[j].k->kind == GB_FDK_PIPE && s->fds[j].k->ino == k->ino &&
		    s->fds[j].k->has_bytes)
			b = s->fds[j].k;
	if (b && b->nbytes > 65536)
		gb_rsys(c, SYS_fcntl, (uint64_t)wr, F_SETPIPE_SZ, b->nbytes, 0, 0, 0);
	int w = b ? put_bytes(c, wr, b->bytes, b->nbytes) : 0;
	if (w)
		return gb_resume__fail(c, w, "fd %d (%s): the pipe's %zu bytes not written back",
				       s->fds[i].fd, s->fds[i].target, b->nbytes);
	for (size_t j = i; j < s->nfds; j++) {
		const struct gb_snap_fd *f = &s->fds[j];
		if (!f->k || f->k->kind != GB_FDK_PIPE || f->k->ino != k->ino)
			continue;
		int e = place(c, (f->flags & O_ACCMODE) == O_RDONLY ? rd : wr, f);
		if (e)
			return e;
	}
	gb_rsys(c, SYS_close, (uint64_t)rd, 0, 0, 0, 0, 0);
	gb_rsys(c, SYS_close, (uint64_t)wr, 0, 0, 0, 0, 0);
	return 0;
}

static int make_one(struct gb_rctx *c, const struct gb_snap_fd *f, int floor)
{
	const struct gb_snap_fdk *k = f->k;
	uint32_t fl = f->flags & (O_NONBLOCK | O_CLOEXEC);
	long r;
	switch (k->kind) {
	case GB_FDK_EVENTFD:
		r = park(c, gb_rsys(c, SYS_eventfd2, 0, fl | (k->semaphore ? 1 : 0), 0, 0, 0, 0), floor);
		if (r >= 0 && k->count) {
			uint64_t a = gb_rput(c, 0, &k->count, 8);
			long w = a ? gb_rsys(c, SYS_write, (uint64_t)r, a, 8, 0, 0, 0) : -EFAULT;
			if (w != 8)
				gb_warn("resume: fd %d (eventfd): its count %llu not restored", f->fd,
					(unsigned long long)k->count);
		}
		break;
	case GB_FDK_TIMERFD:
		r = park(c, gb_rsys(c, SYS_timerfd_create, (uint64_t)k->clockid, fl, 0, 0, 0, 0), floor);
		if (r >= 0 && k->value_ns) {
			uint64_t its[4] = { k->interval_ns / 1000000000u, k->interval_ns % 1000000000u,
					    k->value_ns / 1000000000u, k->value_ns % 1000000000u };
			uint64_t a = gb_rput(c, 0, its, sizeof(its));
			long e = a ? gb_rsys(c, SYS_timerfd_settime, (uint64_t)r, 0, a, 0, 0, 0) : -EFAULT;
			if (e < 0)
				gb_warn("resume: fd %d (timerfd): not armed again: %s", f->fd,
					strerror((int)-e));
		}
		break;
	case GB_FDK_SIGNALFD: {
		uint64_t a = gb_rput(c, 0, &k->sigmask, 8);
		r = park(c, a ? gb_rsys(c, SYS_signalfd4, (uint64_t)-1, a, 8, fl, 0, 0) : -EFAULT, floor);
		break;
	}
	case GB_FDK_INOTIFY:
		r = park(c, gb_rsys(c, SYS_inotify_init1, fl, 0, 0, 0, 0, 0), floor);
		for (size_t i = 0; r >= 0 && i < k->nwatch; i++) {
			const struct gb_fdk_watch *w = &k->watch[i];
			uint64_t a = w->path ? gb_rput(c, 0, w->path, strlen(w->path) + 1) : 0;
			long wd = a ? gb_rsys(c, SYS_inotify_add_watch, (uint64_t)r, a, w->mask, 0, 0, 0)
				    : -ENOENT;
			if (wd < 0)
				gb_warn("resume: fd %d (inotify): watch %d on %s not restored: %s", f->fd,
					w->wd, w->path ? w->path : "(a file whose path was not found)",
					strerror((int)-wd));
			else if (wd != w->wd)
				gb_warn("resume: fd %d (inotify): watch %d on %s came back as watch %ld",
					f->fd, w->wd, w->path, wd);
		}
		break;
	case GB_FDK_MEMFD: {
		uint64_t a = gb_rput(c, 0, k->name ? k->name : "", strlen(k->name ? k->name : "") + 1);
		r = park(c, a ? gb_rsys(c, SYS_memfd_create, a, 2 /* MFD_ALLOW_SEALING */, 0, 0, 0, 0)
			      : -EFAULT, floor);
		if (r < 0)
			break;
		if (!k->has_bytes)
			gb_warn("resume: fd %d (%s): its %llu bytes were not kept (more than %u); it "
				"is empty", f->fd, f->target, (unsigned long long)k->size,
				GB_FDK_MEMFD_MAX);
		int w = k->has_bytes ? put_bytes(c, r, k->bytes, k->nbytes) : 0;
		long e = w ? w : gb_rsys(c, SYS_ftruncate, (uint64_t)r, k->has_bytes ? k->size : 0,
					 0, 0, 0, 0);
		if (!e) {
			long o = gb_rsys(c, SYS_lseek, (uint64_t)r, f->pos, SEEK_SET, 0, 0, 0);
			e = o < 0 ? o : 0;
		}
		if (!e && k->seals)
			e = gb_rsys(c, SYS_fcntl, (uint64_t)r, F_ADD_SEALS, k->seals, 0, 0, 0);
		if (e < 0)
			gb_warn("resume: fd %d (%s): its contents or seals not restored: %s", f->fd,
				f->target, strerror((int)-e));
		break;
	}
	case GB_FDK_EPOLL: {
		r = park(c, gb_rsys(c, SYS_epoll_create1, f->flags & O_CLOEXEC, 0, 0, 0, 0, 0), floor);
		for (size_t i = 0; r >= 0 && i < k->nepi; i++) {
			uint8_t ev[12];
			memcpy(ev, &k->epi[i].events, 4);
			memcpy(ev + 4, &k->epi[i].data, 8);
			uint64_t a = gb_rput(c, 0, ev, sizeof(ev));
			long e = a ? gb_rsys(c, SYS_epoll_ctl, (uint64_t)r, 1 /* EPOLL_CTL_ADD */,
					     (uint64_t)k->epi[i].fd, a, 0, 0) : -EFAULT;
			if (e < 0)
				gb_warn("resume: fd %d (epoll): its interest in fd %d not restored: %s",
					f->fd, k->epi[i].fd, strerror((int)-e));
		}
		break;
	}
	default:
		return 0;
	}
	if (r < 0)
		return gb_resume__fail(c, (int)r, "fd %d (%s): cannot make it again: %s", f->fd,
				       f->target, strerror((int)-r));
	int e = place(c, r, f);
	gb_rsys(c, SYS_close, (uint64_t)r, 0, 0, 0, 0, 0);
	return e;
}

int gb_resume__fd_kinds(struct gb_rctx *c, const struct gb_snapshot *s)
{
	int floor = above_all(s);
	/* every kind but epoll first: an epoll's targets must exist */
	for (int epolls = 0; epolls < 2; epolls++)
		for (size_t i = 0; i < s->nfds; i++) {
			const struct gb_snap_fd *f = &s->fds[i];
			if (f->fd <= 2 || !gb_resume__fd_made(s, f) || gb_resume__choice(c, f->fd) ||
			    (f->k->kind == GB_FDK_EPOLL) != (epolls == 1))
				continue;
			int e = f->k->kind == GB_FDK_PIPE ? make_pipe(c, s, i, floor)
				: f->k->kind == GB_FDK_UNIX ? make_unix(c, s, i, floor)
							    : make_one(c, f, floor);
			if (e)
				return e;
		}
	return 0;
}
