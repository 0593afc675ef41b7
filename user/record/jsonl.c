/* JSONL trace writer: see jsonl.h and docs/trace-format.md. */
#include "record/jsonl.h"

#include <stdlib.h>
#include <string.h>

#include "record/lines.h"

#define LINE_MAX_LEN 160

struct gb_jsonl {
	struct gb_lines *lines;
	struct gb_jsonl_opts o;
	struct gb_jsonl_counts c;
	uint64_t written;   /* lines handed to the output */
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
	w->o = *o;
	struct gb_lines_opts lo = { .give_up_after = o->duration };
	w->lines = gb_lines__new(fd, &lo);
	if (!w->lines) {
		free(w);
		return NULL;
	}
	return w;
}

/* Account one generated line; where to format it, or NULL when it is
 * dropped (budget spent, write error, stalled output). */
static inline char *admit(struct gb_jsonl *w)
{
	w->c.events++;
	char *p = NULL;
	if (!w->o.max_events || w->written < w->o.max_events)
		p = gb_lines__reserve(w->lines, LINE_MAX_LEN);
	if (!p) {
		w->c.dropped++;
		return NULL;
	}
	w->written++;
	return p;
}

#define PUT(lit) do { memcpy(p, lit, sizeof(lit) - 1); p += sizeof(lit) - 1; } while (0)

/* `,"pc":"0x..","vt":N}` and the newline: the end of exec and access lines. */
static void end_pc_vt(struct gb_jsonl *w, char *p0, char *p, uint64_t pc, uint64_t vt)
{
	PUT(",\"pc\":\"");
	p += gb_fmt_hex(p, pc);
	PUT("\",\"vt\":");
	p += fmt_dec(p, vt);
	PUT("}\n");
	gb_lines__commit(w->lines, (size_t)(p - p0));
}

void gb_jsonl__exec(struct gb_jsonl *w, uint32_t vcpu, uint64_t pc, uint64_t vt)
{
	if (!w->o.exec)
		return;
	w->c.insns++;
	char *p0 = admit(w), *p = p0;
	if (!p)
		return;
	PUT("{\"t\":\"exec\",\"vcpu\":");
	p += fmt_dec(p, vcpu);
	end_pc_vt(w, p0, p, pc, vt);
}

void gb_jsonl__mem(struct gb_jsonl *w, bool write, uint32_t vcpu, uint64_t addr, uint32_t size,
		   uint64_t pc, uint64_t vt)
{
	if (write)
		w->c.writes++;
	else
		w->c.reads++;
	char *p0 = admit(w), *p = p0;
	if (!p)
		return;
	if (write)
		PUT("{\"t\":\"write\",\"vcpu\":");
	else
		PUT("{\"t\":\"read\",\"vcpu\":");
	p += fmt_dec(p, vcpu);
	PUT(",\"addr\":\"");
	p += gb_fmt_hex(p, addr);
	PUT("\",\"size\":");
	p += fmt_dec(p, size);
	end_pc_vt(w, p0, p, pc, vt);
}

void gb_jsonl__fault(struct gb_jsonl *w, uint32_t vcpu, uint64_t addr, uint64_t pc, uint64_t err,
		     uint64_t vt)
{
	w->c.faults++;
	char *p0 = admit(w), *p = p0;
	if (!p)
		return;
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
	gb_lines__commit(w->lines, (size_t)(p - p0));
}

static size_t fmt_summary(void *ctx, char *p0)
{
	const struct gb_jsonl *w = ctx;
	struct gb_jsonl_counts c;
	gb_jsonl__counts(w, &c);
	char *p = p0;
	PUT("{\"t\":\"summary\",\"insns\":");
	p += fmt_dec(p, c.insns);
	PUT(",\"mem\":");
	p += fmt_dec(p, c.reads + c.writes);
	PUT(",\"events\":");
	p += fmt_dec(p, c.events);
	PUT(",\"dropped\":");
	p += fmt_dec(p, c.dropped);
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
		p += fmt_dec(p, c.faults);
	}
	PUT("}\n");
	return (size_t)(p - p0);
}

int gb_jsonl__flush(struct gb_jsonl *w) { return gb_lines__flush(w->lines); }

int gb_jsonl__finish(struct gb_jsonl *w) { return gb_lines__finish(w->lines, fmt_summary, w); }

static struct gb_lines_status status(const struct gb_jsonl *w)
{
	struct gb_lines_status st;
	gb_lines__status(w->lines, &st);
	return st;
}

void gb_jsonl__set_range(struct gb_jsonl *w, bool has_start, uint64_t start, bool has_end,
			 uint64_t end)
{
	w->o.has_start = has_start;
	w->o.start = start;
	w->o.has_end = has_end;
	w->o.end = end;
}

int gb_jsonl__error(const struct gb_jsonl *w) { return status(w).err; }

bool gb_jsonl__stalled(const struct gb_jsonl *w) { return status(w).stalled; }

/* Lines lost after they were handed over (write error, cut to make room for
 * the summary, abandoned on a stalled output) are dropped lines too. */
void gb_jsonl__counts(const struct gb_jsonl *w, struct gb_jsonl_counts *c)
{
	*c = w->c;
	c->dropped += status(w).lost;
}

void gb_jsonl__free(struct gb_jsonl *w)
{
	if (!w)
		return;
	gb_lines__free(w->lines);
	free(w);
}
