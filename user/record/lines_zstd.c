/* The writer discipline of record/lines.h for a zstd output (record/zframes.h):
 *
 *  - the writer thread compresses (the producer never does): each round of
 *    lines goes into the frame in progress, and a frame ends after 4 MiB of
 *    lines, or when it is a second old (ZFRAME_NS: lines that come slowly
 *    reach the file within about a second, as plain lines do within 250 ms),
 *    or when flush() waits for it;
 *  - only whole frames: each frame is written whole when it is complete; a
 *    write error cuts a regular file back to the end of its last whole frame
 *    (the frame's lines are lost, and every later line), so a SIGKILLed or
 *    failed gebpf leaves a file every frame of which decompresses;
 *  - the summary last, in a frame of its own: on a full disk whole frames
 *    are removed from the end of a regular file (their lines counted lost)
 *    until it fits; then the seek table, which a full disk may leave out
 *    (the frames decompress without it);
 *  - a regular file is written buffered (no O_DIRECT): its bytes are a
 *    twentieth or less of the lines, the page cache's cost with them.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "record/lines_int.h"
#include "record/zframes.h"

static int emit(void *ctx, const struct gb_zframe *f)
{
	struct gb_lines *w = ctx;
	if (w->z_err) {
		if (!w->z_summary)
			w->z_lost += f->lines;
		return w->z_err;
	}
	int err = 0;
	size_t done = gb_lines_write_out(w, f->data, f->size, &err);
	if (done == f->size) {
		w->file_off += (off_t)f->size;
		w->nlines += f->lines;
		w->z_in += f->in_bytes;
		w->bytes_all += f->size;
		w->z_last_ns = gb_lines_mono_ns();
		return 0;
	}
	if (w->regular && ftruncate(w->fd, w->file_off) == 0)
		lseek(w->fd, w->file_off, SEEK_SET);
	else if (done)
		w->z_torn = true;
	w->z_err = err ? err : -EAGAIN; /* (no error: given up on a stalled output) */
	if (!w->z_summary)
		w->z_lost += f->lines;
	return w->z_err;
}

int gb_lines_z__init(struct gb_lines *w, int level, int workers)
{
	/* GEBPF_ZSTD_LEVEL / GEBPF_ZSTD_WORKERS: for measuring (docs/benchmarks.md) */
	const char *e = getenv("GEBPF_ZSTD_LEVEL");
	if (e && *e)
		level = atoi(e);
	if ((e = getenv("GEBPF_ZSTD_WORKERS")) && *e)
		workers = atoi(e);
	struct gb_zframes_opts o = { .level = level, .workers = workers };
	w->z = gb_zframes__new(&o, emit, w);
	if (!w->z)
		return -errno;
	w->z_last_ns = gb_lines_mono_ns();
	return 0;
}

/* Lock held: what the frames did, for the producer and status(). */
static void account(struct gb_lines *w)
{
	w->z_pending = gb_zframes__pending(w->z);
	w->lost += w->z_lost;
	w->z_lost = 0;
}

void gb_lines_z__round(struct gb_lines *w, const char *out, size_t len, uint64_t lines)
{
	pthread_mutex_unlock(&w->mu);
	gb_zframes__write_n(w->z, out, len, lines); /* (errors: emit() noted them) */
	if (gb_zframes__pending(w->z) && gb_lines_mono_ns() - w->z_last_ns >= ZFRAME_NS)
		gb_zframes__end_frame(w->z);
	pthread_mutex_lock(&w->mu);
	account(w);
}

bool gb_lines_z__tick(struct gb_lines *w)
{
	if (!w->z_pending || w->err || w->z_err)
		return false;
	bool due = w->z_flush ? w->fill_len <= w->carry
			      : gb_lines_mono_ns() - w->z_last_ns >= ZFRAME_NS;
	if (!due)
		return false;
	pthread_mutex_unlock(&w->mu);
	gb_zframes__end_frame(w->z);
	pthread_mutex_lock(&w->mu);
	account(w);
	if (w->z_err && w->z_err != -EAGAIN && !w->err)
		w->err = w->z_err;
	pthread_cond_broadcast(&w->room);
	return true;
}

/* Remove the last whole frame of a regular file; false when not possible. */
static bool drop_last_frame(struct gb_lines *w)
{
	struct gb_zframe f;
	if (!w->regular || gb_zframes__drop_last(w->z, &f))
		return false;
	off_t to = w->file_off - (off_t)f.size;
	if (to < w->base || ftruncate(w->fd, to) || lseek(w->fd, to, SEEK_SET) < 0)
		return false;
	w->file_off = to;
	w->nlines -= f.lines;
	w->lost += f.lines;
	return true;
}

/* A pipe takes nothing more within a second: give up on it. */
static bool writable_soon(struct gb_lines *w)
{
	if (w->regular)
		return true;
	struct pollfd p = { .fd = w->fd, .events = POLLOUT };
	return poll(&p, 1, 1000) > 0;
}

/* The summary's frame; 0 or -errno. */
static int put_summary(struct gb_lines *w)
{
	char buf[SUMMARY_MAX];
	if (!writable_soon(w))
		return -EAGAIN;
	w->z_err = 0;
	w->z_summary = true;
	int e = gb_zframes__write(w->z, buf, w->summary_fn(w->summary_ctx, buf));
	if (!e)
		e = gb_zframes__end_frame(w->z);
	w->z_summary = false;
	return e;
}

int gb_lines_z__finish(struct gb_lines *w, int flushed)
{
	/* The frame in progress: refused (its lines lost) after a write error
	 * or when the output stalled. */
	if (!w->z_err && (w->err || flushed == -EAGAIN || !writable_soon(w)))
		w->z_err = w->err ? w->err : -EAGAIN;
	gb_zframes__end_frame(w->z);
	account(w);
	int first = w->err;
	if (w->z_torn) /* a pipe holds part of a frame: a frame after it would not decode */
		return first ? first : -EAGAIN;
	bool ok = false;
	for (int tries = 0; tries < NENDS; tries++) {
		int e = put_summary(w);
		if (!e) {
			ok = true;
			break;
		}
		if (!first)
			first = e;
		if (e == -EAGAIN || w->z_torn || !drop_last_frame(w))
			break;
	}
	if (ok && !writable_soon(w))
		ok = false;
	if (ok) {
		w->z_err = 0;
		int e = gb_zframes__finish(w->z);
		if (e)
			gb_warn("output: the zstd seek table was not written (%s): the frames "
				"decompress without it", strerror(-e));
	}
	struct gb_zframes_totals t;
	gb_zframes__totals(w->z, &t);
	gb_info("output: zstd: %llu frames, %.1f MB of lines in %.1f MB (%.1fx)",
		(unsigned long long)t.frames, (double)t.in_bytes / 1e6, (double)t.out_bytes / 1e6,
		t.out_bytes ? (double)t.in_bytes / (double)t.out_bytes : 0.0);
	return first;
}

void gb_lines_z__free(struct gb_lines *w)
{
	gb_zframes__free(w->z);
	w->z = NULL;
}
