/* Creating output files: see output.h. */
#include "record/output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"

static int open_once(const char *path, mode_t mode, bool *created)
{
	/* O_NONBLOCK only for the open: a FIFO with no reader fails with
	 * ENXIO instead of waiting for one.  O_NOFOLLOW always: whoever made a
	 * symlink (root too, in a shared directory), writing through it
	 * overwrites a file the user did not name. */
	int fl = O_WRONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW;
	int fd = open(path, fl | O_CREAT | O_EXCL, mode);
	if (fd >= 0) {
		*created = true;
		return fd;
	}
	if (errno != EEXIST)
		return -errno;
	*created = false;
	fd = open(path, fl | O_TRUNC);
	return fd >= 0 ? fd : -errno;
}

static const char *why(int e)
{
	switch (e) {
	case ENXIO: return "a FIFO with no reader (start the reader first)";
	case ELOOP: return "is a symbolic link (give the file it points to)";
	default: return strerror(e);
	}
}

/* The descriptor gebpf already has that PATH names (/dev/stdout,
 * /dev/stderr, /dev/fd/N, /proc/self/fd/N), or -1.  Opening those again
 * would truncate a regular file the caller's shell opened for appending
 * (`>> log`): its descriptor is duplicated instead (offset and O_APPEND
 * shared). */
static int named_fd(const char *path)
{
	if (!strcmp(path, "/dev/stdout"))
		return 1;
	if (!strcmp(path, "/dev/stderr"))
		return 2;
	const char *p = !strncmp(path, "/dev/fd/", 8)         ? path + 8
			: !strncmp(path, "/proc/self/fd/", 14) ? path + 14 : NULL;
	if (!p || *p < '0' || *p > '9')
		return -1;
	char *end;
	long n = strtol(p, &end, 10);
	return *end || n > INT_MAX ? -1 : (int)n;
}

static int dup_named(int n)
{
	int fl = fcntl(n, F_GETFL);
	if (fl < 0)
		return -errno;
	if ((fl & O_ACCMODE) == O_RDONLY)
		return -EBADF;
	int fd = fcntl(n, F_DUPFD_CLOEXEC, 3);
	return fd >= 0 ? fd : -errno;
}

int gb_output_open(struct gb_output *out, const char *path, mode_t mode)
{
	out->fd = -1;
	out->created = false;
	out->path = path;
	int n = named_fd(path);
	out->own = n < 0;
	int fd = n >= 0 ? dup_named(n) : open_once(path, mode, &out->created);
	if (fd == -ENOENT)
		fd = open_once(path, mode, &out->created); /* removed between the two opens */
	if (fd < 0) {
		char to[256];
		ssize_t n = fd == -ELOOP ? readlink(path, to, sizeof(to) - 1) : -1;
		if (n > 0) {
			to[n] = 0;
			gb_err("%s: cannot write: a symbolic link (to %s); give the real path", path, to);
		} else {
			gb_err("%s: cannot write: %s", path, why(-fd));
		}
		return fd;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK)) {
		int e = errno;
		gb_err("%s: cannot write: %s", path, strerror(e));
		close(fd);
		if (out->created)
			unlink(path);
		return -e;
	}
	out->fd = fd;
	return 0;
}

int gb_output_close(struct gb_output *out, bool discard)
{
	if (out->fd < 0)
		return 0;
	int r = close(out->fd) ? -errno : 0;
	out->fd = -1;
	if (discard && out->created)
		unlink(out->path);
	return r;
}
