/* Whole lines, summary last, never a blocked producer: see lines.h. */
#include "record/lines.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/sigflag.h"
#include "record/lines_int.h"
#include "record/numfmt.h"
#include "record/wmode.h"

/* Remember the line ends of buf[0..len), written at file_off: lines of
 * them (UINT64_MAX: count them). */
static void note_ends(struct gb_lines *w, const char *buf, size_t len, uint64_t lines)
{
	off_t fresh[NENDS];
	int k = 0;
	for (size_t i = len; i > 0 && k < NENDS; i--)
		if (buf[i - 1] == '\n')
			fresh[k++] = w->file_off + (off_t)i;
	int keep = w->nends + k > NENDS ? NENDS - k : w->nends;
	memmove(w->ends, w->ends + (w->nends - keep), (size_t)keep * sizeof(off_t));
	for (int j = 0; j < k; j++)
		w->ends[keep + j] = fresh[k - 1 - j];
	w->nends = keep + k;
	w->nlines += lines == UINT64_MAX ? gb_numfmt_lines(buf, len) : lines;
	w->file_off += (off_t)len;
}

/* Direct: out[0..len) at file offset at (aligned), of which out[0..from) is
 * in the file already.  The aligned part goes with O_DIRECT (no copy into
 * the page cache: record/wmode.h says when that wins).  The unaligned end is
 * written buffered, so that the file ends at a line's end after every round
 * as before (a SIGKILLed gebpf leaves whole lines); the next round's direct
 * write covers that block again.  Returns the bytes of out in the file;
 * *err on failure. */
static size_t write_direct(struct gb_lines *w, const char *out, size_t len, size_t from, off_t at,
			   int *err)
{
	size_t d = len & ~(size_t)(DIO_ALIGN - 1), done = 0;
	while (done < d) {
		ssize_t r = pwrite(w->dfd, out + done, d - done, at + (off_t)done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EINVAL) {
			close(w->dfd); /* a stricter alignment: buffered from now on */
			w->dfd = -1;
			gb_wmode__no_direct(&w->mode);
			break;
		}
		if (r <= 0) {
			*err = r < 0 ? -errno : -ENOSPC;
			return done;
		}
		done += (size_t)r;
		atomic_store(&w->progress_ns, gb_lines_mono_ns());
		if (done % DIO_ALIGN)
			break; /* (short: the rest buffered) */
	}
	w->bytes_direct += done > from ? done - from : 0;
	if (lseek(w->fd, at + (off_t)done, SEEK_SET) < 0) {
		*err = -errno;
		return done;
	}
	return done + gb_lines_write_out(w, out + done, len - done, err);
}

/* One round of the writer: out[0..len) at file offset at, of which
 * out[0..from) is in the file already (the direct way's carry), timed for
 * the choice of the way.  Buffered when at is not aligned: the round that
 * turns to direct writes, its carry makes the next one start aligned. */
static size_t write_round(struct gb_lines *w, const char *out, size_t len, size_t from, off_t at,
			  int *err)
{
	uint64_t t0 = gb_mono_ns();
	size_t done;
	if (w->dfd >= 0 && w->mode.direct && at % DIO_ALIGN == 0)
		done = write_direct(w, out, len, from, at, err);
	else if (from && lseek(w->fd, at, SEEK_SET) < 0) /* (after direct writes) */
		*err = -errno, done = 0;
	else
		done = gb_lines_write_out(w, out, len, err);
	size_t fresh = done - (done < from ? done : from);
	w->bytes_all += fresh;
	if (w->dfd >= 0)
		gb_wmode__round(&w->mode, fresh, gb_mono_ns() - t0);
	return done;
}

/* After a round of out[0..len) (out[0..from) in the file before it, out[0]
 * at file offset at) that stopped at done: keep whole lines, count the rest
 * lost.  Called with the lock held. */
static void settle(struct gb_lines *w, size_t len, size_t done, size_t from, off_t at)
{
	size_t keep = done < from ? from : done;
	while (keep > from && w->out[keep - 1] != '\n')
		keep--;
	if (keep < done && w->regular && ftruncate(w->fd, at + (off_t)keep) == 0)
		lseek(w->fd, at + (off_t)keep, SEEK_SET);
	else if (keep < done)
		keep = done;
	if (keep == len) {
		note_ends(w, w->out + from, keep - from, w->out_lines); /* (the producer's count) */
	} else {
		note_ends(w, w->out + from, keep - from, UINT64_MAX);
		w->lost += gb_numfmt_lines(w->out + keep, len - keep);
	}
}

static void *writer_main(void *arg)
{
	struct gb_lines *w = arg;
	pthread_mutex_lock(&w->mu);
	while (!atomic_load(&w->quit)) {
		if (w->z && gb_lines_z__tick(w))
			continue;
		if (w->fill_len <= w->carry || w->err) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_nsec += TICK_MS * 1000000l;
			ts.tv_sec += ts.tv_nsec / 1000000000l;
			ts.tv_nsec %= 1000000000l;
			pthread_cond_timedwait(&w->work, &w->mu, &ts);
			continue;
		}
		if (w->pending) { /* (the producer is filling a reservation in it) */
			w->swap_wait = true;
			pthread_cond_wait(&w->work, &w->mu);
			w->swap_wait = false;
			continue;
		}
		char *t = w->out;
		w->out = w->fill;
		w->fill = t;
		size_t len = w->fill_len, from = w->carry;
		off_t at = w->file_off - (off_t)from;
		size_t tail = w->dfd >= 0 && w->mode.direct ? (size_t)(at + (off_t)len) % DIO_ALIGN : 0;
		if (tail > len)
			tail = 0; /* (turning direct: the block began before this round) */
		memcpy(w->fill, w->out + len - tail, tail); /* the next round starts aligned */
		w->out_len = len;
		w->out_lines = w->fill_lines;
		w->fill_lines = 0;
		w->fill_len = w->carry = tail;
		atomic_store(&w->progress_ns, gb_lines_mono_ns());
		pthread_cond_broadcast(&w->room);
		int err = 0;
		if (w->z) {
			/* (zstd writes no carry: out_lines are all of out's) */
			gb_lines_z__round(w, w->out, len, from ? UINT64_MAX : w->out_lines);
			if (w->z_err != -EAGAIN) /* (not an error: given up on a stall) */
				err = w->z_err;
		} else {
			pthread_mutex_unlock(&w->mu);
			size_t done = write_round(w, w->out, len, from, at, &err);
			pthread_mutex_lock(&w->mu);
			settle(w, len, done, from, at);
		}
		if (err && !w->err) {
			w->err = err;
			w->lost += w->fill_lines;
			w->fill_len = w->carry = 0;
			w->fill_lines = 0;
		}
		w->out_len = 0;
		pthread_cond_broadcast(&w->room);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

struct gb_lines *gb_lines__new(int fd, const struct gb_lines_opts *o)
{
	struct gb_lines *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	size_t cap = o && o->capacity ? o->capacity : (2u << 20);
	w->half = cap / 2 > SUMMARY_MAX ? cap / 2 : SUMMARY_MAX;
	w->half = (w->half + DIO_ALIGN - 1) & ~(size_t)(DIO_ALIGN - 1);
	void *a = NULL, *b = NULL;
	if (posix_memalign(&a, DIO_ALIGN, w->half) || posix_memalign(&b, DIO_ALIGN, w->half)) {
		free(a);
		a = NULL;
	}
	w->fill = a;
	w->out = b;
	w->fd = fd;
	w->dfd = -1;
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		w->regular = true;
		w->base = lseek(fd, 0, SEEK_CUR);
		if (w->base < 0)
			w->base = 0;
		w->file_off = w->base;
		if (o && o->direct && !o->zstd && w->base % DIO_ALIGN == 0) {
			char p[40];
			snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
			w->dfd = open(p, O_WRONLY | O_DIRECT | O_CLOEXEC); /* -1: none here */
		}
		gb_wmode__init(&w->mode, w->dfd >= 0);
		w->could_direct = w->dfd >= 0;
		/* GEBPF_WRITE_DIRECT=1: direct from the start (the kernel matrix's
		 * small traces never reach the first window's end) */
		const char *e = getenv("GEBPF_WRITE_DIRECT");
		w->mode.direct = w->dfd >= 0 && (o->direct_first || (e && !strcmp(e, "1")));
	}
	w->pipe = fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
	if (o && o->zstd) {
		int ze = gb_lines_z__init(w, o->zstd_level, 0);
		if (ze) {
			gb_lines__free(w);
			errno = -ze;
			return NULL;
		}
	}
	if (o && o->give_up_after > 0)
		w->give_up_at = gb_mono_s() + o->give_up_after;
	atomic_store(&w->progress_ns, gb_lines_mono_ns());
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->work, &ca);
	pthread_cond_init(&w->room, &ca);
	pthread_condattr_destroy(&ca);
	/* The writer thread takes no signal: SIGINT/SIGTERM must interrupt the
	 * tracer's waits (common/sigflag.h), and SIGPIPE/SIGXFSZ become EPIPE/
	 * EFBIG from write(). */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int e = w->fill && w->out ? pthread_create(&w->thread, NULL, writer_main, w) : ENOMEM;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		gb_lines__free(w);
		errno = e;
		return NULL;
	}
	w->running = true;
	return w;
}

static double stall_s(const struct gb_lines *w) { return w->regular ? STALL_FILE_S : STALL_S; }

static bool stalled_locked(struct gb_lines *w)
{
	double idle = (double)(gb_lines_mono_ns() - atomic_load(&w->progress_ns)) / 1e9;
	return w->gave_up || (w->out_len && idle >= stall_s(w));
}

/* One slice of waiting for the writer (lock held).  False when the producer
 * must stop waiting: a signal or the give-up time came, and the output has
 * taken nothing for STALL_S. */
static bool wait_writer(struct gb_lines *w)
{
	struct timespec ts;
	pthread_cond_signal(&w->work);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += SLICE_MS * 1000000l;
	ts.tv_sec += ts.tv_nsec / 1000000000l;
	ts.tv_nsec %= 1000000000l;
	pthread_cond_timedwait(&w->room, &w->mu, &ts);
	bool stop = gb_sigflag_stop() || (w->give_up_at && gb_mono_s() >= w->give_up_at);
	if (stop && (double)(gb_lines_mono_ns() - atomic_load(&w->progress_ns)) / 1e9 >= stall_s(w))
		w->gave_up = true;
	return !w->gave_up;
}

/* The lock is held only to find the room and to commit it: the producer
 * fills its reservation (a line, or the translating engine's batch of
 * 64 KiB) without it, so the writer is not kept from its next round while
 * lines are made (it was: a producer taking the lock again at once for its
 * next batch left the writer waiting for a whole buffer, and each half of
 * the pipeline idle a third of the time). */
char *gb_lines__reserve(struct gb_lines *w, size_t max)
{
	pthread_mutex_lock(&w->mu);
	while (!w->err && max <= w->half) {
		if (w->fill_len + max <= w->half) {
			char *at = w->fill + w->fill_len;
			w->pending = true;
			pthread_mutex_unlock(&w->mu);
			return at;
		}
		if (w->gave_up || !wait_writer(w))
			break;
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

void gb_lines__commit(struct gb_lines *w, size_t len, uint64_t lines)
{
	pthread_mutex_lock(&w->mu);
	if (w->err) {
		/* (the writer failed meanwhile: what it had is counted lost) */
		w->lost += lines;
	} else {
		/* An idle writer has not stalled: the clock of "taken nothing for
		 * STALL_S" starts when there is something to take (a trace whose
		 * first lines come seconds after the output was opened, on a loaded
		 * machine, was given up at once). */
		if (w->fill_len <= w->carry && !w->out_len && len)
			atomic_store(&w->progress_ns, gb_lines_mono_ns());
		w->fill_len += len;
		w->fill_lines += lines;
	}
	w->pending = false;
	if (w->swap_wait)
		pthread_cond_signal(&w->work);
	pthread_mutex_unlock(&w->mu);
}

int gb_lines__flush(struct gb_lines *w)
{
	pthread_mutex_lock(&w->mu);
	w->z_flush = true; /* zstd: the frame in progress ends too */
	while (!w->err && (w->fill_len > w->carry || w->out_len || w->z_pending) && !w->gave_up &&
	       wait_writer(w))
		;
	int r = w->err ? w->err : (w->fill_len > w->carry || w->out_len || w->z_pending) ? -EAGAIN : 0;
	w->z_flush = false;
	pthread_mutex_unlock(&w->mu);
	return r;
}

static void stop_writer(struct gb_lines *w)
{
	if (!w->running)
		return;
	pthread_mutex_lock(&w->mu);
	atomic_store(&w->quit, true);
	pthread_cond_broadcast(&w->work);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	w->running = false;
}

/* Write the summary once (no writer thread any more).  0 or -errno. */
static int put_summary(struct gb_lines *w, const char *buf, size_t n)
{
	if (!w->regular) {
		struct pollfd p = { .fd = w->fd, .events = POLLOUT };
		if (poll(&p, 1, 1000) <= 0)
			return -EAGAIN;
	}
	int err = 0;
	size_t done = gb_lines_write_out(w, buf, n, &err);
	if (done == n) {
		note_ends(w, buf, n, UINT64_MAX);
		return 0;
	}
	if (w->regular && ftruncate(w->fd, w->file_off) == 0)
		lseek(w->fd, w->file_off, SEEK_SET);
	return err ? err : -EAGAIN;
}

/* Remove the last whole line of a regular file; false when not possible. */
static bool drop_last_line(struct gb_lines *w)
{
	if (!w->regular || w->nends == 0 || (w->nends == 1 && w->nlines > 1))
		return false;
	off_t to = w->nends >= 2 ? w->ends[w->nends - 2] : w->base;
	if (ftruncate(w->fd, to) || lseek(w->fd, to, SEEK_SET) < 0)
		return false;
	w->nends--;
	w->nlines--;
	w->file_off = to;
	w->lost++;
	return true;
}

int gb_lines__finish(struct gb_lines *w, gb_lines_summary_fn fn, void *ctx)
{
	int r = gb_lines__flush(w);
	if (r == -EAGAIN)
		w->stalled_for = (double)(gb_lines_mono_ns() - atomic_load(&w->progress_ns)) / 1e9;
	stop_writer(w);
	/* What the writer never took (the output stalled) is lost. */
	w->lost += w->fill_lines;
	w->fill_len = w->carry = 0;
	w->fill_lines = 0;
	atomic_store(&w->quit, false); /* put_summary's poll */
	int first = w->err;
	if (w->z) {
		w->until_ns = gb_lines_mono_ns() + 2000000000ll; /* a pipe: frames whole or given up */
		w->summary_fn = fn;
		w->summary_ctx = ctx;
		first = gb_lines_z__finish(w, r);
	} else {
		char buf[SUMMARY_MAX];
		for (int tries = 0; tries < NENDS; tries++) {
			int e = put_summary(w, buf, fn(ctx, buf));
			if (!e)
				break;
			if (!first)
				first = e;
			if (e == -EAGAIN || !drop_last_line(w))
				break;
		}
	}
	if (!first && r == -EAGAIN)
		first = -EAGAIN;
	w->err = first;
	if (w->could_direct)
		gb_info("output: %.1f MB written, %.0f%% direct (O_DIRECT), the way changed %llu times; "
			"last measured %.0f MB/s direct, %.0f MB/s buffered", (double)w->bytes_all / 1e6,
			w->bytes_all ? 100.0 * (double)w->bytes_direct / (double)w->bytes_all : 0.0,
			(unsigned long long)w->mode.switches, w->mode.rate[1] / 1e6,
			w->mode.rate[0] / 1e6);
	return first;
}

void gb_lines__status(struct gb_lines *w, struct gb_lines_status *st)
{
	pthread_mutex_lock(&w->mu);
	st->err = w->err;
	st->stalled = stalled_locked(w);
	st->lost = w->lost;
	st->bytes_direct = w->bytes_direct;
	st->switches = w->mode.switches;
	pthread_mutex_unlock(&w->mu);
}

const char *gb_lines__failure(struct gb_lines *w, char *buf, size_t len)
{
	pthread_mutex_lock(&w->mu);
	int err = w->err;
	double s = w->stalled_for;
	pthread_mutex_unlock(&w->mu);
	/* At least a second without progress came before the give-up. */
	if (err == -EAGAIN && w->pipe)
		snprintf(buf, len, "the reader stopped reading (pipe full for %.0f s)", s < 1 ? 1 : s);
	else if (err == -EAGAIN)
		snprintf(buf, len, "the output took nothing for %.0f s", s < 1 ? 1 : s);
	else
		snprintf(buf, len, "%s", strerror(err ? -err : EIO));
	return buf;
}

void gb_lines__free(struct gb_lines *w)
{
	if (!w)
		return;
	stop_writer(w);
	if (w->z)
		gb_lines_z__free(w);
	pthread_cond_destroy(&w->work);
	pthread_cond_destroy(&w->room);
	pthread_mutex_destroy(&w->mu);
	if (w->dfd >= 0)
		close(w->dfd);
	free(w->fill);
	free(w->out);
	free(w);
}
