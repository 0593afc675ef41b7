/* `gebpf sample` JSONL lines: jsonl.h and docs/sample.md. */
#include "sample/jsonl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUF_BYTES (256u << 10)
#define LINE_MAX_BYTES 512

struct gb_sample_out {
	int fd;
	bool regular;
	off_t off;                 /* file offset after the last whole line written */
	char *buf;
	size_t len;
	int err;                   /* first write error (sticky) */
	uint64_t unwritten;        /* lines not in the file */
};

struct gb_sample_out *gb_sample_out__new(int fd)
{
	struct gb_sample_out *w = calloc(1, sizeof(*w));
	struct stat st;

	if (!w || !(w->buf = malloc(BUF_BYTES))) {
		free(w);
		return NULL;
	}
	w->fd = fd;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		w->regular = true;
		w->off = lseek(fd, 0, SEEK_CUR);
		if (w->off < 0)
			w->off = 0;
	}
	return w;
}

static uint64_t count_lines(const char *p, size_t n)
{
	uint64_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += p[i] == '\n';
	return k;
}

/* Write n bytes; returns the bytes written before an error (errno set). */
static size_t write_all(int fd, const char *p, size_t n)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = write(fd, p + done, n - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (!r)
				errno = ENOSPC;
			break;
		}
		done += (size_t)r;
	}
	return done;
}

/* Cut a regular file back to whole lines after a short write of a buffer
 * whose first `done` bytes made it. */
static void keep_whole_lines(struct gb_sample_out *w, const char *p, size_t n, size_t done)
{
	size_t keep = done;
	while (keep > 0 && p[keep - 1] != '\n')
		keep--;
	if (w->regular && keep < done && ftruncate(w->fd, w->off + (off_t)keep) == 0)
		lseek(w->fd, w->off + (off_t)keep, SEEK_SET);
	else
		keep = done;
	w->unwritten += count_lines(p + keep, n - keep);
	w->off += (off_t)keep;
}

int gb_sample_out__flush(struct gb_sample_out *w)
{
	if (!w->len)
		return w->err;
	if (w->err) {
		w->unwritten += count_lines(w->buf, w->len);
	} else {
		size_t done = write_all(w->fd, w->buf, w->len);
		if (done < w->len) {
			w->err = -errno;
			keep_whole_lines(w, w->buf, w->len, done);
		} else {
			w->off += (off_t)done;
		}
	}
	w->len = 0;
	return w->err;
}

static void put(struct gb_sample_out *w, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (BUF_BYTES - w->len < LINE_MAX_BYTES)
		gb_sample_out__flush(w);
	va_start(ap, fmt);
	n = vsnprintf(w->buf + w->len, LINE_MAX_BYTES, fmt, ap);
	va_end(ap);
	if (n > 0 && n < LINE_MAX_BYTES)
		w->len += (size_t)n;
}

/* comm as a JSON string body: quotes, backslashes and controls escaped. */
static void json_str(char *out, size_t len, const char *s)
{
	size_t k = 0;
	for (; *s && k + 7 < len; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			k += (size_t)snprintf(out + k, len - k, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			k += (size_t)snprintf(out + k, len - k, "\\u%04x", c);
		else
			out[k++] = (char)c;
	}
	out[k] = 0;
}

void gb_sample_out__sample(struct gb_sample_out *w, const struct gb_sample *s)
{
	char comm[6 * 16 + 1];

	json_str(comm, sizeof(comm), s->comm ? s->comm : "");
	put(w, "{\"t\":\"sample\",\"vcpu\":%" PRIu32 ",\"tid\":%d,\"pid\":%d,\"comm\":\"%s\",\"pc\":\"0x%"
	    PRIx64 "\",\"ns\":%" PRIu64 "}\n", s->cpu, (int)s->tid, (int)s->pid, comm, s->pc, s->ns);
}

void gb_sample_out__fault(struct gb_sample_out *w, const struct gb_fault *x)
{
	put(w, "{\"t\":\"fault\",\"vcpu\":%" PRIu32 ",\"tid\":%d,\"addr\":\"0x%" PRIx64
	    "\",\"pc\":\"0x%" PRIx64 "\",\"err\":\"0x%" PRIx64 "\",\"ns\":%" PRIu64 "}\n",
	    x->cpu, (int)x->tid, x->addr, x->ip, x->err, x->ns);
}

static int fmt_summary(const struct gb_sample_out *w, const struct gb_sample_summary *s,
		       char *line, size_t len)
{
	const struct gb_sampler_stats *st = &s->st;
	int n = snprintf(line, len, "{\"t\":\"summary\",\"seen\":%" PRIu64 ",\"kept\":%" PRIu64
			 ",\"filtered\":%" PRIu64 ",\"filtered_pid\":%" PRIu64 ",\"filtered_range\":%"
			 PRIu64 ",\"lost\":%" PRIu64 ",\"event\":\"%s\",\"hz\":%" PRIu64, st->seen,
			 st->kept, st->other + st->out_of_range, st->other, st->out_of_range, st->lost,
			 s->event, s->hz);
	if (s->has_range)
		n += snprintf(line + n, len - (size_t)n, ",\"start\":\"0x%" PRIx64 "\",\"end\":\"0x%"
			      PRIx64 "\"", s->start, s->end);
	else
		n += snprintf(line + n, len - (size_t)n, ",\"start\":null,\"end\":null");
	if (s->faults)
		n += snprintf(line + n, len - (size_t)n, ",\"faults\":%" PRIu64 ",\"faults_lost\":%"
			      PRIu64, st->faults, st->faults_lost);
	if (w->unwritten)
		n += snprintf(line + n, len - (size_t)n, ",\"unwritten\":%" PRIu64, w->unwritten);
	n += snprintf(line + n, len - (size_t)n, "}\n");
	return n;
}

/* Remove the last whole line of the file (to make room for the summary).
 * 0, or -1 when the file cannot be read back or cut. */
static int drop_last_line(struct gb_sample_out *w)
{
	char blk[4096];
	off_t end = w->off - 1;     /* before the last line's newline */

	while (end > 0) {
		off_t from = end > (off_t)sizeof(blk) ? end - (off_t)sizeof(blk) : 0;
		ssize_t n = pread(w->fd, blk, (size_t)(end - from), from);
		if (n <= 0)
			return -1;
		for (ssize_t i = n - 1; i >= 0; i--)
			if (blk[i] == '\n') {
				end = from + i + 1;
				goto cut;
			}
		end = from;
	}
	end = 0;
cut:
	if (ftruncate(w->fd, end) || lseek(w->fd, end, SEEK_SET) < 0)
		return -1;
	w->off = end;
	w->unwritten++;
	return 0;
}

int gb_sample_out__finish(struct gb_sample_out *w, const struct gb_sample_summary *s)
{
	int first = gb_sample_out__flush(w);

	for (int tries = 0; tries < 256; tries++) {
		char line[LINE_MAX_BYTES];
		size_t n = (size_t)fmt_summary(w, s, line, sizeof(line));
		size_t done = write_all(w->fd, line, n);
		if (done == n) {
			w->off += (off_t)n;
			break;
		}
		if (!first)
			first = -errno;
		/* A partial summary goes; then whole lines from the end. */
		if (!w->regular || ftruncate(w->fd, w->off) || lseek(w->fd, w->off, SEEK_SET) < 0 ||
		    w->off == 0 || drop_last_line(w))
			break;
	}
	w->err = first;
	return first;
}

void gb_sample_out__free(struct gb_sample_out *w)
{
	if (!w)
		return;
	free(w->buf);
	free(w);
}
