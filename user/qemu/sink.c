/* The plugin's trace output (sink.h). */
#include "qemu/sink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "record/linefmt.h"
#include "record/numfmt.h"
#include "record/zframes.h"

#define BUF_BYTES (8u << 20)
#define LINE_MAX_LEN 192     /* the longest line, the summary included, fits
			      * (and GB_LINEFMT_ROOM) */

struct gb_qsink {
	struct gb_qsink_opts o;
	int fd;
	bool has_start, has_end;
	uint64_t start, end;
	uint64_t vt;                  /* the next instruction's */
	uint64_t written;             /* lines admitted (the budget) */
	struct gb_qsink_counts c;
	int err;                      /* sticky -errno */
	bool budget_said;             /* the budget's one stderr line is out */
	off_t good;                   /* bytes of the file that are whole lines */
	bool regular;
	struct gb_zframes *z;         /* zstd: the frames (NULL: plain lines) */
	struct gb_linefmt fmt;        /* the lines' texts, as gebpf's (record/linefmt.h) */
	char *buf;
	size_t used;
	uint64_t buf_lines;           /* lines in buf */
};

static inline char *put_hex(char *p, uint64_t v)
{
	return p + gb_numfmt_hex(p, v);
}

static inline char *put_dec(char *p, uint64_t v)
{
	return p + gb_numfmt_dec(p, v);
}

#define PUT(p, lit) (memcpy((p), (lit), sizeof(lit) - 1), (p) + sizeof(lit) - 1)

/* data[0..len) whole into the output.  0, or -errno (then a regular file
 * is cut back to its last whole line or frame). */
static int write_all(struct gb_qsink *s, const void *data, size_t len)
{
	size_t off = 0;
	while (off < len) {
		ssize_t n = write(s->fd, (const char *)data + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? -errno : -EIO;
			if (s->regular && ftruncate(s->fd, s->good) == 0)
				lseek(s->fd, s->good, SEEK_SET);
			return err;
		}
		off += (size_t)n;
	}
	s->good += (off_t)len;
	return 0;
}

/* zstd: one complete frame (user/record/zframes.h).  Its lines are dropped
 * when it does not make it. */
static int emit_frame(void *ctx, const struct gb_zframe *f)
{
	struct gb_qsink *s = ctx;
	if (!s->err)
		s->err = write_all(s, f->data, f->size);
	if (s->err)
		s->c.dropped += f->lines;
	return s->err;
}

/* Hand the buffer to the output.  Lines that do not make it are dropped. */
static void flush(struct gb_qsink *s)
{
	if (s->z) {
		/* emit_frame() counts the lines of a frame that fails */
		if (gb_zframes__write(s->z, s->buf, s->used) && !s->err)
			s->err = -EIO;
	} else if (s->err || (s->err = write_all(s, s->buf, s->used))) {
		s->c.dropped += s->buf_lines;
	}
	s->used = 0;
	s->buf_lines = 0;
}

/* Account one generated line of at most room bytes: where to format it,
 * or NULL when dropped. */
static inline char *admit_n(struct gb_qsink *s, size_t room)
{
	s->c.events++;
	if (s->o.max_events && s->written >= s->o.max_events && !s->budget_said) {
		/* once, as gebpf trace says it */
		s->budget_said = true;
		fprintf(stderr, "gebpf: warning: qemu plugin: max_events=%llu reached at vt %llu: "
			"further lines are counted as dropped (max_events=0 for no limit)\n",
			(unsigned long long)s->o.max_events, (unsigned long long)(s->vt - 1));
	}
	if (s->err || (s->o.max_events && s->written >= s->o.max_events)) {
		s->c.dropped++;
		return NULL;
	}
	if (BUF_BYTES - s->used < room)
		flush(s);
	if (s->err) {
		s->c.dropped++;
		return NULL;
	}
	s->written++;
	s->buf_lines++;
	return s->buf + s->used;
}

static inline char *admit(struct gb_qsink *s)
{
	return admit_n(s, LINE_MAX_LEN);
}

struct gb_qsink *gb_qsink__new(int fd, const struct gb_qsink_opts *o)
{
	struct gb_qsink *s = calloc(1, sizeof(*s));
	struct stat st;
	if (!s || !(s->buf = malloc(BUF_BYTES))) {
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	s->o = *o;
	gb_linefmt_init(&s->fmt); /* (without its cache: the same lines, slower) */
	s->fd = fd;
	if (o->zstd) {
		struct gb_zframes_opts zo = { 0 };
		s->z = gb_zframes__new(&zo, emit_frame, s);
		if (!s->z) {
			int e = errno;
			free(s->buf);
			free(s);
			errno = e;
			return NULL;
		}
	}
	s->regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	if (s->regular)
		s->good = lseek(fd, 0, SEEK_CUR);
	if (s->good < 0)
		s->good = 0;
	return s;
}

void gb_qsink__set_range(struct gb_qsink *s, bool has_start, uint64_t start, bool has_end,
			 uint64_t end)
{
	s->has_start = has_start;
	s->start = start;
	s->has_end = has_end;
	s->end = end;
}

void gb_qsink__insn(struct gb_qsink *s, uint32_t vcpu, uint64_t pc, const struct gb_qacc *acc,
		    uint32_t n)
{
	uint64_t vt = s->vt++;
	char *p;
	if (s->o.exec) {
		s->c.insns++;
		if ((p = admit(s)))
			s->used += (size_t)(gb_linefmt_exec(&s->fmt, p, vcpu, pc, vt) - p);
	}
	for (uint32_t i = 0; i < n; i++) {
		s->c.mem++;
		if ((p = admit(s)))
			s->used += (size_t)(gb_linefmt_acc(&s->fmt, p, vcpu, acc[i].write != 0,
							   acc[i].addr, acc[i].size, pc, vt) - p);
	}
}

#ifdef GB_QEMU_VALUES
/* The valued lines, made by linefmt.h as gebpf's own writer makes them
 * (record/jsonl.c gb_jsonl__insn_vals).  A regs object is a few kB at most
 * (the whole file: 16 xmm registers of 34 digits, 8 st of 22, the rest 18). */
void gb_qsink__insn_vals(struct gb_qsink *s, uint32_t vcpu, uint64_t pc, const char *file,
			 const char *regs, const struct gb_qacc *acc, uint32_t n)
{
	uint64_t vt = s->vt++;
	char *p;
	if (file) {
		size_t fl = strlen(file);
		if ((p = admit_n(s, LINE_MAX_LEN + fl)))
			s->used += (size_t)(gb_linefmt_regs(p, vcpu, file, fl, vt) - p);
	}
	if (s->o.exec) {
		size_t rl = strlen(regs);
		s->c.insns++;
		if ((p = admit_n(s, LINE_MAX_LEN + rl)))
			s->used += (size_t)(gb_linefmt_exec_regs(p, vcpu, pc, regs, rl, vt) - p);
	}
	for (uint32_t i = 0; i < n; i++) {
		s->c.mem++;
		if (!(p = admit_n(s, LINE_MAX_LEN + 40)))
			continue;
		char val[2 + 2 * sizeof(acc[i].val) + 1];
		int vl = 0;
		if (acc[i].has_val)
			vl = gb_numfmt_hexle(val, acc[i].val,
					     acc[i].size < sizeof(acc[i].val) ? acc[i].size : sizeof(acc[i].val));
		s->used += (size_t)(gb_linefmt_acc_val(p, vcpu, acc[i].write != 0, acc[i].addr,
						       acc[i].size, acc[i].has_val ? val : NULL,
						       (size_t)vl, pc, vt) - p);
	}
}
#endif

int gb_qsink__finish(struct gb_qsink *s)
{
	flush(s);
	if (s->z && gb_zframes__end_frame(s->z) && !s->err)   /* the summary: a frame of its own */
		s->err = -EIO;
	/* after a write error the summary is still tried (it says what was
	 * dropped), as gebpf does */
	int err = s->err;
	s->err = 0;
	char *p0 = s->buf + s->used, *p = p0;
	p = PUT(p, "{\"t\":\"summary\",\"insns\":");
	p = put_dec(p, s->c.insns);
	p = PUT(p, ",\"mem\":");
	p = put_dec(p, s->c.mem);
	p = PUT(p, ",\"events\":");
	p = put_dec(p, s->c.events);
	p = PUT(p, ",\"dropped\":");
	p = put_dec(p, s->c.dropped);
	p = s->o.exec ? PUT(p, ",\"exec\":true,\"start\":") : PUT(p, ",\"exec\":false,\"start\":");
	if (s->has_start) {
		*p++ = '"';
		p = put_hex(p, s->start);
		*p++ = '"';
	} else {
		p = PUT(p, "null");
	}
	p = PUT(p, ",\"end\":");
	if (s->has_end) {
		*p++ = '"';
		p = put_hex(p, s->end);
		*p++ = '"';
	} else {
		p = PUT(p, "null");
	}
	p = PUT(p, "}\n");
	s->used += (size_t)(p - p0);
	s->buf_lines = 0;   /* the summary is not a counted line */
	flush(s);
	if (s->z && gb_zframes__finish(s->z) && !s->err)
		s->err = -EIO;
	if (!err)
		err = s->err;
	s->err = err;
	return err;
}

void gb_qsink__counts(const struct gb_qsink *s, struct gb_qsink_counts *c)
{
	*c = s->c;
}

void gb_qsink__free(struct gb_qsink *s)
{
	if (!s)
		return;
	gb_zframes__free(s->z);
	if (s->fd > 2)
		close(s->fd);
	free(s->buf);
	gb_linefmt_free(&s->fmt);
	free(s);
}
