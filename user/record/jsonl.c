/* JSONL trace writer: see jsonl.h and docs/trace-format.md. */
#include "record/jsonl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/access.h"
#include "common/log.h"
#include "record/linefmt.h"
#include "record/lines.h"
#include "record/numfmt.h"

#define LINE_MAX_LEN GB_LINEFMT_ROOM
/* Bytes taken at once from the writer in a batch (gb_jsonl__batch). */
#define BATCH_LEN (64 * 1024)

struct gb_jsonl {
	struct gb_lines *lines;
	struct gb_linefmt fmt;  /* the exec and access lines' texts (record/linefmt.h) */
	struct gb_jsonl_opts o;
	struct gb_jsonl_counts c;
	uint64_t written;   /* lines handed to the output */
	bool batch;         /* gb_jsonl__batch: lines go into chunk */
	char *chunk;        /* room reserved from the writer (record/lines.h), or NULL */
	size_t chunk_used;
	uint64_t chunk_lines;
	bool budget_said;   /* the budget's warning was printed */
	bool alone;         /* the line being made was reserved on its own */
};

struct gb_jsonl *gb_jsonl__new(int fd, const struct gb_jsonl_opts *o)
{
	struct gb_jsonl *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->o = *o;
	gb_linefmt_init(&w->fmt); /* (without its cache: the same lines, slower) */
	struct gb_lines_opts lo = { .give_up_after = o->duration, .direct = o->direct,
				    .zstd = o->zstd };
	w->lines = gb_lines__new(fd, &lo);
	if (!w->lines) {
		free(w);
		return NULL;
	}
	return w;
}

/* Hand the batch's lines over (the writer may take them). */
static void release(struct gb_jsonl *w)
{
	if (w->chunk)
		gb_lines__commit(w->lines, w->chunk_used, w->chunk_lines);
	w->chunk = NULL;
}

void gb_jsonl__batch(struct gb_jsonl *w, bool on)
{
	if (!on)
		release(w);
	w->batch = on;
}

/* Once, when the first line is dropped for the budget. */
static void budget_warn(struct gb_jsonl *w, uint64_t vt)
{
	if (w->o.max_events && w->written >= w->o.max_events && !w->budget_said) {
		w->budget_said = true;
		gb_warn("trace: --max-events %llu reached at vt %llu: further lines are counted "
			"as dropped (--max-events 0 for no limit)",
			(unsigned long long)w->o.max_events, (unsigned long long)vt);
	}
}

/* Account one generated line; where to format it, or NULL when it is
 * dropped (budget spent, write error, stalled output). */
static inline char *admit_n(struct gb_jsonl *w, uint64_t vt, size_t room)
{
	w->c.events++;
	char *p = NULL;
	budget_warn(w, vt);
	if (!w->o.max_events || w->written < w->o.max_events) {
		if (!w->batch || room > BATCH_LEN / 2) {
			release(w); /* (a long valued line in a batch: on its own) */
			p = gb_lines__reserve(w->lines, room);
		} else {
			if (w->chunk && BATCH_LEN - w->chunk_used < room)
				release(w);
			if (!w->chunk) {
				w->chunk = gb_lines__reserve(w->lines, BATCH_LEN);
				w->chunk_used = 0;
				w->chunk_lines = 0;
			}
			p = w->chunk ? w->chunk + w->chunk_used : NULL;
		}
	}
	if (!p) {
		w->c.dropped++;
		return NULL;
	}
	w->written++;
	w->alone = !w->batch || room > BATCH_LEN / 2;
	return p;
}

static inline char *admit(struct gb_jsonl *w, uint64_t vt)
{
	return admit_n(w, vt, LINE_MAX_LEN);
}

/* The line formatted at p0 ends at p. */
static inline void done(struct gb_jsonl *w, char *p0, char *p)
{
	if (!w->alone) {
		w->chunk_used += (size_t)(p - p0);
		w->chunk_lines++;
	} else {
		gb_lines__commit(w->lines, (size_t)(p - p0), 1);
	}
}

#define PUT(lit) do { memcpy(p, lit, sizeof(lit) - 1); p += sizeof(lit) - 1; } while (0)

void gb_jsonl__exec(struct gb_jsonl *w, uint32_t vcpu, uint64_t pc, uint64_t vt)
{
	if (!w->o.exec)
		return;
	w->c.insns++;
	char *p = admit(w, vt);
	if (p)
		done(w, p, gb_linefmt_exec(&w->fmt, p, vcpu, pc, vt));
}

void gb_jsonl__mem(struct gb_jsonl *w, bool write, uint32_t vcpu, uint64_t addr, uint32_t size,
		   uint64_t pc, uint64_t vt)
{
	if (write)
		w->c.writes++;
	else
		w->c.reads++;
	char *p = admit(w, vt);
	if (p)
		done(w, p, gb_linefmt_acc(&w->fmt, p, vcpu, write, addr, size, pc, vt));
}

/* An instruction's lines at once, where the batch's chunk has room for
 * them all and the budget takes them all (else line by line, the same
 * bytes and counts): a call and a budget check per line were most of the
 * patch trap's drain. */
void gb_jsonl__insn(struct gb_jsonl *w, uint32_t vcpu, uint64_t pc, const struct gb_access *acc,
		    int nacc, uint64_t vt)
{
	unsigned nl = (w->o.exec ? 1u : 0u) + (unsigned)nacc;
	if (!w->batch || !w->chunk || BATCH_LEN - w->chunk_used < (size_t)nl * LINE_MAX_LEN ||
	    (w->o.max_events && w->written + nl > w->o.max_events)) {
		gb_jsonl__exec(w, vcpu, pc, vt);
		for (int k = 0; k < nacc; k++)
			gb_jsonl__mem(w, acc[k].write, vcpu, acc[k].addr, acc[k].size, pc, vt);
		return;
	}
	w->c.events += nl;
	w->written += nl;
	char *p0 = w->chunk + w->chunk_used, *p = p0;
	if (w->o.exec) {
		w->c.insns++;
		p = gb_linefmt_exec(&w->fmt, p, vcpu, pc, vt);
	}
	for (int k = 0; k < nacc; k++) {
		if (acc[k].write)
			w->c.writes++;
		else
			w->c.reads++;
		p = gb_linefmt_acc(&w->fmt, p, vcpu, acc[k].write, acc[k].addr, acc[k].size, pc, vt);
	}
	w->chunk_used += (size_t)(p - p0);
	w->chunk_lines += nl;
}

void gb_jsonl__fault(struct gb_jsonl *w, uint32_t vcpu, uint64_t addr, uint64_t pc, uint64_t err,
		     uint64_t vt)
{
	w->c.faults++;
	char *p0 = admit(w, vt), *p = p0;
	if (!p)
		return;
	PUT("{\"t\":\"fault\",\"vcpu\":");
	p += gb_numfmt_dec(p, vcpu);
	PUT(",\"addr\":\"");
	p += gb_numfmt_hex(p, addr);
	PUT("\",\"pc\":\"");
	p += gb_numfmt_hex(p, pc);
	PUT("\",\"err\":\"");
	p += gb_numfmt_hex(p, err);
	PUT("\",\"vt\":");
	p += gb_numfmt_dec(p, vt);
	PUT("}\n");
	done(w, p0, p);
}

void gb_jsonl__insn_vals(struct gb_jsonl *w, uint32_t vcpu, uint64_t pc, const char *regs,
			 const struct gb_access *acc, const char *const *vals, int nacc,
			 uint64_t vt)
{
	if (w->o.exec) {
		w->c.insns++;
		size_t rl = strlen(regs);
		char *p = admit_n(w, vt, LINE_MAX_LEN + rl);
		if (p)
			done(w, p, gb_linefmt_exec_regs(p, vcpu, pc, regs, rl, vt));
	}
	for (int k = 0; k < nacc; k++) {
		if (acc[k].write)
			w->c.writes++;
		else
			w->c.reads++;
		size_t vl = vals[k] ? strlen(vals[k]) : 0;
		char *p = admit_n(w, vt, LINE_MAX_LEN + vl);
		if (p)
			done(w, p, gb_linefmt_acc_val(p, vcpu, acc[k].write, acc[k].addr, acc[k].size,
						      vals[k], vl, pc, vt));
	}
}

void gb_jsonl__regs(struct gb_jsonl *w, uint32_t vcpu, const char *regs, uint64_t vt)
{
	w->c.regs++;
	size_t rl = strlen(regs);
	char *p = admit_n(w, vt, LINE_MAX_LEN + rl);
	if (p)
		done(w, p, gb_linefmt_regs(p, vcpu, regs, rl, vt));
}

static size_t fmt_summary(void *ctx, char *p0)
{
	const struct gb_jsonl *w = ctx;
	struct gb_jsonl_counts c;
	gb_jsonl__counts(w, &c);
	char *p = p0;
	PUT("{\"t\":\"summary\",\"insns\":");
	p += gb_numfmt_dec(p, c.insns);
	PUT(",\"mem\":");
	p += gb_numfmt_dec(p, c.reads + c.writes);
	PUT(",\"events\":");
	p += gb_numfmt_dec(p, c.events);
	PUT(",\"dropped\":");
	p += gb_numfmt_dec(p, c.dropped);
	if (w->o.exec)
		PUT(",\"exec\":true,\"start\":");
	else
		PUT(",\"exec\":false,\"start\":");
	if (w->o.has_start) {
		*p++ = '"';
		p += gb_numfmt_hex(p, w->o.start);
		*p++ = '"';
	} else {
		PUT("null");
	}
	PUT(",\"end\":");
	if (w->o.has_end) {
		*p++ = '"';
		p += gb_numfmt_hex(p, w->o.end);
		*p++ = '"';
	} else {
		PUT("null");
	}
	if (w->o.faults) {
		PUT(",\"faults\":");
		p += gb_numfmt_dec(p, c.faults);
	}
	PUT("}\n");
	return (size_t)(p - p0);
}

int gb_jsonl__flush(struct gb_jsonl *w)
{
	release(w);
	return gb_lines__flush(w->lines);
}

int gb_jsonl__finish(struct gb_jsonl *w)
{
	gb_jsonl__batch(w, false);
	return gb_lines__finish(w->lines, fmt_summary, w);
}

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

const char *gb_jsonl__failure(const struct gb_jsonl *w, char *buf, size_t len)
{
	char why[160];
	gb_lines__failure(w->lines, why, sizeof(why));
	if (status(w).err == -EAGAIN)
		snprintf(buf, len, "%s", why);
	else
		snprintf(buf, len, "writing the trace failed: %s", why);
	return buf;
}

/* Lines lost after they were handed over (write error, cut to make room for
 * the summary, abandoned on a stalled output) are dropped lines too. */
void gb_jsonl__counts(const struct gb_jsonl *w, struct gb_jsonl_counts *c)
{
	*c = w->c;
	c->dropped += status(w).lost;
}

bool gb_jsonl__full(const struct gb_jsonl *w)
{
	return w->o.max_events && w->written >= w->o.max_events;
}

uint64_t gb_jsonl__max_events(const struct gb_jsonl *w) { return w->o.max_events; }

void gb_jsonl__count_more(struct gb_jsonl *w, int64_t exec, int64_t reads, int64_t writes,
			  uint64_t vt)
{
	if (!w->o.exec)
		exec = 0;
	int64_t n = exec + reads + writes;
	if (n > 0)
		budget_warn(w, vt);
	w->c.insns += (uint64_t)exec;
	w->c.reads += (uint64_t)reads;
	w->c.writes += (uint64_t)writes;
	w->c.events += (uint64_t)n;
	w->c.dropped += (uint64_t)n;
}

void gb_jsonl__free(struct gb_jsonl *w)
{
	if (!w)
		return;
	release(w);
	gb_lines__free(w->lines);
	gb_linefmt_free(&w->fmt);
	free(w);
}
