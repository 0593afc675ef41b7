/* JSONL trace writer: see jsonl.h and docs/trace-format.md. */
#include "record/jsonl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUF_SIZE (1u << 20)
#define LINE_MAX_LEN 160

struct gb_jsonl {
	int fd;
	struct gb_jsonl_opts o;
	struct gb_jsonl_counts c;
	uint64_t written;   /* lines accepted into the buffer/file */
	char *buf;
	size_t len;
	int err;            /* sticky -errno */
	off_t file_off;     /* bytes of whole lines known to be in the file */
	bool regular;       /* fd is a regular file (can be cut back) */
};

int gb_fmt_hex(char *buf, uint64_t v)
{
	static const char digits[] = "0123456789abcdef";
	char tmp[16];
	int n = 0;
	do {
		tmp[n++] = digits[v & 15];
		v >>= 4;
	} while (v);
	buf[0] = '0';
	buf[1] = 'x';
	for (int i = 0; i < n; i++)
		buf[2 + i] = tmp[n - 1 - i];
	return n + 2;
}

static int fmt_dec(char *buf, uint64_t v)
{
	char tmp[20];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (int i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	return n;
}

struct gb_jsonl *gb_jsonl__new(int fd, const struct gb_jsonl_opts *o)
{
	struct gb_jsonl *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->buf = malloc(BUF_SIZE);
	if (!w->buf) {
		free(w);
		return NULL;
	}
	w->fd = fd;
	w->o = *o;
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		w->regular = true;
		w->file_off = lseek(fd, 0, SEEK_CUR);
		if (w->file_off < 0)
			w->file_off = 0;
	}
	return w;
}

/* Cut a regular file back to the end of the last line that ends before
 * off; returns the new length, or -1 when the file cannot be read back (a
 * write-only descriptor) or cut. */
static off_t cut_to_line(int fd, off_t off)
{
	char blk[4096];
	off_t end = off;
	while (end > 0) {
		off_t from = end > (off_t)sizeof(blk) ? end - (off_t)sizeof(blk) : 0;
		ssize_t n = pread(fd, blk, (size_t)(end - from), from);
		if (n <= 0)
			return -1;
		for (ssize_t i = n - 1; i >= 0; i--)
			if (blk[i] == '\n')
				return ftruncate(fd, from + i + 1) ? -1 : from + i + 1;
		end = from;
	}
	return ftruncate(fd, 0) ? -1 : 0;
}

static uint64_t count_lines(const char *p, size_t n)
{
	uint64_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += p[i] == '\n';
	return k;
}

/* Write the buffer out.  On failure: record the error, cut the file back to
 * whole lines and count the lines that did not make it as dropped. */
static int flush_buf(struct gb_jsonl *w)
{
	size_t done = 0;
	while (done < w->len && !w->err) {
		ssize_t r = write(w->fd, w->buf + done, w->len - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			w->err = r < 0 ? -errno : -ENOSPC;
			break;
		}
		done += (size_t)r;
	}
	if (w->err && w->len) {
		/* Keep the whole lines that made it; a partly written line is
		 * cut off.  Lines not written are lost: count them dropped. */
		size_t keep = done;
		while (keep > 0 && w->buf[keep - 1] != '\n')
			keep--;
		if (w->regular && keep < done && ftruncate(w->fd, w->file_off + (off_t)keep) == 0)
			lseek(w->fd, w->file_off + (off_t)keep, SEEK_SET);
		else
			keep = done;
		w->c.dropped += count_lines(w->buf + keep, w->len - keep);
		w->file_off += (off_t)keep;
		w->len = 0;
		return w->err;
	}
	w->file_off += (off_t)done;
	w->len = 0;
	return w->err;
}

/* Account one generated line; true when it should be written. */
static inline bool admit(struct gb_jsonl *w)
{
	w->c.events++;
	if ((w->o.max_events && w->written >= w->o.max_events) || w->err) {
		w->c.dropped++;
		return false;
	}
	w->written++;
	if (w->len + LINE_MAX_LEN > BUF_SIZE)
		flush_buf(w);
	if (w->err) {
		w->c.dropped++;
		return false;
	}
	return true;
}

#define PUT(lit) do { memcpy(p, lit, sizeof(lit) - 1); p += sizeof(lit) - 1; } while (0)

/* `,"pc":"0x..","vt":N}` and the newline: the end of exec and access lines. */
static void end_pc_vt(struct gb_jsonl *w, char *p, uint64_t pc, uint64_t vt)
{
	PUT(",\"pc\":\"");
	p += gb_fmt_hex(p, pc);
	PUT("\",\"vt\":");
	p += fmt_dec(p, vt);
	PUT("}\n");
	w->len = (size_t)(p - w->buf);
}

void gb_jsonl__exec(struct gb_jsonl *w, uint32_t vcpu, uint64_t pc, uint64_t vt)
{
	if (!w->o.exec)
		return;
	w->c.insns++;
	if (!admit(w))
		return;
	char *p = w->buf + w->len;
	PUT("{\"t\":\"exec\",\"vcpu\":");
	p += fmt_dec(p, vcpu);
	end_pc_vt(w, p, pc, vt);
}

void gb_jsonl__mem(struct gb_jsonl *w, bool write, uint32_t vcpu, uint64_t addr, uint32_t size,
		   uint64_t pc, uint64_t vt)
{
	if (write)
		w->c.writes++;
	else
		w->c.reads++;
	if (!admit(w))
		return;
	char *p = w->buf + w->len;
	if (write)
		PUT("{\"t\":\"write\",\"vcpu\":");
	else
		PUT("{\"t\":\"read\",\"vcpu\":");
	p += fmt_dec(p, vcpu);
	PUT(",\"addr\":\"");
	p += gb_fmt_hex(p, addr);
	PUT("\",\"size\":");
	p += fmt_dec(p, size);
	end_pc_vt(w, p, pc, vt);
}

void gb_jsonl__fault(struct gb_jsonl *w, uint32_t vcpu, uint64_t addr, uint64_t pc, uint64_t err,
		     uint64_t vt)
{
	w->c.faults++;
	if (!admit(w))
		return;
	char *p = w->buf + w->len;
	PUT("{\"t\":\"fault\",\"vcpu\":");
	p += fmt_dec(p, vcpu);
	PUT(",\"addr\":\"");
	p += gb_fmt_hex(p, addr);
	PUT("\",\"pc\":\"");
	p += gb_fmt_hex(p, pc);
	PUT("\",\"err\":\"");
	p += gb_fmt_hex(p, err);
	PUT("\",\"vt\":");
	p += fmt_dec(p, vt);
	PUT("}\n");
	w->len = (size_t)(p - w->buf);
}

static size_t fmt_summary(const struct gb_jsonl *w, char *p0)
{
	char *p = p0;
	PUT("{\"t\":\"summary\",\"insns\":");
	p += fmt_dec(p, w->c.insns);
	PUT(",\"mem\":");
	p += fmt_dec(p, w->c.reads + w->c.writes);
	PUT(",\"events\":");
	p += fmt_dec(p, w->c.events);
	PUT(",\"dropped\":");
	p += fmt_dec(p, w->c.dropped);
	if (w->o.exec)
		PUT(",\"exec\":true,\"start\":");
	else
		PUT(",\"exec\":false,\"start\":");
	if (w->o.has_start) {
		*p++ = '"';
		p += gb_fmt_hex(p, w->o.start);
		*p++ = '"';
	} else {
		PUT("null");
	}
	PUT(",\"end\":");
	if (w->o.has_end) {
		*p++ = '"';
		p += gb_fmt_hex(p, w->o.end);
		*p++ = '"';
	} else {
		PUT("null");
	}
	if (w->o.faults) {
		PUT(",\"faults\":");
		p += fmt_dec(p, w->c.faults);
	}
	PUT("}\n");
	return (size_t)(p - p0);
}

int gb_jsonl__flush(struct gb_jsonl *w)
{
	return flush_buf(w);
}

void gb_jsonl__set_range(struct gb_jsonl *w, bool has_start, uint64_t start, bool has_end,
			 uint64_t end)
{
	w->o.has_start = has_start;
	w->o.start = start;
	w->o.has_end = has_end;
	w->o.end = end;
}

int gb_jsonl__finish(struct gb_jsonl *w)
{
	flush_buf(w);
	int first_err = w->err;
	/* The summary is written even after an error: make room for it by
	 * removing whole lines from the end (counted as dropped) until it fits. */
	for (int tries = 0; tries < 64; tries++) {
		char line[LINE_MAX_LEN * 2];
		size_t n = fmt_summary(w, line);
		ssize_t r;
		do {
			r = write(w->fd, line, n);
		} while (r < 0 && errno == EINTR);
		if (r == (ssize_t)n) {
			w->file_off += (off_t)n;
			break;
		}
		if (!first_err)
			first_err = r < 0 ? -errno : -ENOSPC;
		if (!w->regular || w->file_off == 0)
			break;
		/* Drop a partial summary and the last whole line to make room. */
		off_t before = w->file_off;
		off_t cut = cut_to_line(w->fd, before - 1);
		if (cut < 0 || cut >= before)
			break;
		w->file_off = cut;
		lseek(w->fd, w->file_off, SEEK_SET);
		w->c.dropped++;
	}
	w->err = first_err;
	return first_err;
}

int gb_jsonl__error(const struct gb_jsonl *w) { return w->err; }

void gb_jsonl__counts(const struct gb_jsonl *w, struct gb_jsonl_counts *c) { *c = w->c; }

void gb_jsonl__free(struct gb_jsonl *w)
{
	if (!w)
		return;
	free(w->buf);
	free(w);
}
