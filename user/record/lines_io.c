/* The writer's writes to its file descriptor, for plain lines (lines.c)
 * and zstd frames (lines_zstd.c) alike: see lines_int.h. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdatomic.h>
#include <unistd.h>

#include "common/clock.h"
#include "record/lines_int.h"

/* The clock in signed nanoseconds: progress_ns is written by the writer
 * thread between our reads, so a difference may be (slightly) negative. */
long long gb_lines_mono_ns(void)
{
	return (long long)gb_mono_ns();
}

/* Wait until fd takes bytes, in slices; false when told to quit. */
static bool wait_writable(struct gb_lines *w)
{
	struct pollfd p = { .fd = w->fd, .events = POLLOUT };
	while (!atomic_load(&w->quit) && !(w->until_ns && gb_lines_mono_ns() >= w->until_ns)) {
		int r = poll(&p, 1, SLICE_MS);
		if (r > 0 || (r < 0 && errno != EINTR))
			return true;
	}
	return false;
}

/* Write buf without the lock.  A pipe gets writes of whole lines of at most
 * PIPE_BUF bytes after poll() said it has room, so a write never blocks and
 * never tears a line (zstd: writes of PIPE_BUF bytes until the frame is
 * whole).  Returns the bytes written; *err on failure. */
size_t gb_lines_write_out(struct gb_lines *w, const char *buf, size_t len, int *err)
{
	size_t done = 0;
	while (done < len) {
		size_t n = len - done;
		if (!w->regular) {
			if (n > PIPE_BUF) {
				n = PIPE_BUF;
				while (!w->z && n > 0 && buf[done + n - 1] != '\n')
					n--;
				if (!n)
					n = PIPE_BUF; /* a line longer than PIPE_BUF */
			}
			if (!wait_writable(w))
				return done;
		}
		ssize_t r = write(w->fd, buf + done, n);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0) {
			*err = r < 0 ? -errno : -ENOSPC;
			return done;
		}
		done += (size_t)r;
		atomic_store(&w->progress_ns, gb_lines_mono_ns());
	}
	return done;
}
