/* JSONL trace writer: see jsonl.h and docs/trace-format.md. */
#include "record/jsonl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/access.h"
#include "common/log.h"
#include "record/lines.h"
#include "record/numfmt.h"

#define LINE_MAX_LEN 160
/* Bytes taken at once from the writer in a batch (gb_jsonl__batch). */
#define BATCH_LEN (64 * 1024)

/* The end of exec and access lines, `,"pc":"0x..","vt":N}\n`, for the last
 * (pc, vt) written: an instruction's lines share it, and the next
 * instruction's vt is mostly the last one plus one (a decimal counter,
 * record/numfmt.h).  The pc's part is copied whole (32 bytes) and the line
 * advanced by its length: a line's reservation (LINE_MAX_LEN) has the room. */
struct tail {
	bool valid;
	uint64_t pc;
	unsigned pc_n;
	const char *pc_s;   /* ,"pc":"0x...","vt":   (7 + 18 + 7 bytes at most, in 32) */
	struct gb_numfmt_ctr vt;
};

/* The pc part of the lines of the pcs seen, made once per pc: a range's
 * few hundred instructions run millions of times (formatting the hex at
 * each new pc was half of the writer's time on bench_qemu.py's job).  A
 * direct-mapped cache, by the pc's low bits: a pc whose slot another took
 * is made again (the same bytes). */
#define PCS_BITS 12
struct pc_text {
	uint64_t pc;
	uint32_t n;         /* 0: empty */
	uint32_t exec_vcpu; /* exec's vcpu + 1 (0: exec not made) */
	uint32_t exec_n;
	char s[36];
	char exec[64];      /* {"t":"exec","vcpu":V,"pc":"0x...","vt":  (gb_jsonl__insn) */
};

/* The heads of a vcpu's access lines, {"t":"read","vcpu":V,"addr":" and the
 * write's (gb_jsonl__insn), for the last vcpu seen. */
struct acc_heads {
	uint32_t vcpu;      /* + 1 (0: none yet) */
	uint32_t n[2];
	char s[2][48];      /* [write] */
};

struct gb_jsonl {
	struct gb_lines *lines;
	struct tail tail;
	struct gb_jsonl_opts o;
	struct gb_jsonl_counts c;
	uint64_t written;   /* lines handed to the output */
	bool batch;         /* gb_jsonl__batch: lines go into chunk */
	char *chunk;        /* room reserved from the writer (record/lines.h), or NULL */
	size_t chunk_used;
	uint64_t chunk_lines;
	bool budget_said;   /* the budget's warning was printed */
	struct pc_text *pcs; /* 1 << PCS_BITS of them (NULL: each made in place) */
	char pc_own[36];     /* ... here */
	struct acc_heads heads;
};



struct gb_jsonl *gb_jsonl__new(int fd, const struct gb_jsonl_opts *o)
{
	struct gb_jsonl *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->o = *o;
	w->pcs = calloc(1u << PCS_BITS, sizeof(*w->pcs));
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
static inline char *admit(struct gb_jsonl *w, uint64_t vt)
{
	w->c.events++;
	char *p = NULL;
	budget_warn(w, vt);
	if (!w->o.max_events || w->written < w->o.max_events) {
		if (!w->batch) {
			p = gb_lines__reserve(w->lines, LINE_MAX_LEN);
		} else {
			if (w->chunk && BATCH_LEN - w->chunk_used < LINE_MAX_LEN)
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
	return p;
}

/* The line formatted at p0 ends at p. */
static inline void done(struct gb_jsonl *w, char *p0, char *p)
{
	if (w->batch) {
		w->chunk_used += (size_t)(p - p0);
		w->chunk_lines++;
	} else {
		gb_lines__commit(w->lines, (size_t)(p - p0), 1);
	}
}

#define PUT(lit) do { memcpy(p, lit, sizeof(lit) - 1); p += sizeof(lit) - 1; } while (0)

/* A small count (vcpu, size): one digit mostly. */
static inline int fmt_small(char *buf, uint32_t v)
{
	if (v < 10) {
		*buf = (char)('0' + v);
		return 1;
	}
	return gb_numfmt_dec(buf, v);
}

static inline struct tail *tail_for(struct gb_jsonl *w, uint64_t pc)
{
	struct tail *t = &w->tail;
	if (t->valid && t->pc == pc)
		return t;
	struct pc_text *f = w->pcs ? &w->pcs[(pc ^ pc >> PCS_BITS) & ((1u << PCS_BITS) - 1)] : NULL;
	if (!f || f->pc != pc || !f->n) {
		char *p0 = f ? f->s : w->pc_own, *p = p0;
		PUT(",\"pc\":\"");
		p += gb_numfmt_hex(p, pc);
		PUT("\",\"vt\":");
		if (f) {
			f->pc = pc;
			f->n = (uint32_t)(p - p0);
			f->exec_vcpu = 0;
		}
		t->pc_n = (unsigned)(p - p0);
		t->pc_s = p0;
	} else {
		t->pc_n = f->n;
		t->pc_s = f->s;
	}
	t->pc = pc;
	t->valid = true;
	return t;
}

/* `,"pc":"0x..","vt":N}` and the newline: the end of exec and access lines. */
static inline void end_pc_vt(struct gb_jsonl *w, char *p0, char *p, uint64_t pc, uint64_t vt)
{
	struct tail *t = tail_for(w, pc);
	memcpy(p, t->pc_s, 32);
	p += t->pc_n;
	p += gb_numfmt_ctr_put(&t->vt, p, vt);
	memcpy(p, "}\n", 2);
	p += 2;
	done(w, p0, p);
}

void gb_jsonl__exec(struct gb_jsonl *w, uint32_t vcpu, uint64_t pc, uint64_t vt)
{
	if (!w->o.exec)
		return;
	w->c.insns++;
	char *p0 = admit(w, vt), *p = p0;
	if (!p)
		return;
	PUT("{\"t\":\"exec\",\"vcpu\":");
	p += fmt_small(p, vcpu);
	end_pc_vt(w, p0, p, pc, vt);
}

void gb_jsonl__mem(struct gb_jsonl *w, bool write, uint32_t vcpu, uint64_t addr, uint32_t size,
		   uint64_t pc, uint64_t vt)
{
	if (write)
		w->c.writes++;
	else
		w->c.reads++;
	char *p0 = admit(w, vt), *p = p0;
	if (!p)
		return;
	if (write)
		PUT("{\"t\":\"write\",\"vcpu\":");
	else
		PUT("{\"t\":\"read\",\"vcpu\":");
	p += fmt_small(p, vcpu);
	PUT(",\"addr\":\"");
	p += gb_numfmt_hex(p, addr);
	PUT("\",\"size\":");
	p += fmt_small(p, size);
	end_pc_vt(w, p0, p, pc, vt);
}

/* An instruction's lines at once, where the batch's chunk has room for
 * them all and the budget takes them all (else line by line, the same
 * bytes): the exec line's text but vt made once per pc and vcpu, the
 * access lines' heads once per vcpu, the pc's part and vt's digits shared
 * (a line by line call for each was most of the patch trap's drain). */
void gb_jsonl__insn(struct gb_jsonl *w, uint32_t vcpu, uint64_t pc, const struct gb_access *acc,
		    int nacc, uint64_t vt)
{
	unsigned nl = (w->o.exec ? 1u : 0u) + (unsigned)nacc;
	if (!w->batch || !w->chunk || !w->pcs || BATCH_LEN - w->chunk_used < (size_t)nl * LINE_MAX_LEN ||
	    (w->o.max_events && w->written + nl > w->o.max_events)) {
		gb_jsonl__exec(w, vcpu, pc, vt);
		for (int k = 0; k < nacc; k++)
			gb_jsonl__mem(w, acc[k].write, vcpu, acc[k].addr, acc[k].size, pc, vt);
		return;
	}
	w->c.events += nl;
	w->written += nl;
	struct tail *t = tail_for(w, pc);
	struct pc_text *f = &w->pcs[(pc ^ pc >> PCS_BITS) & ((1u << PCS_BITS) - 1)]; /* (t's) */
	char *p0 = w->chunk + w->chunk_used, *p = p0;
	if (w->o.exec) {
		w->c.insns++;
		if (f->exec_vcpu != vcpu + 1) {
			char *q = f->exec;
			memcpy(q, "{\"t\":\"exec\",\"vcpu\":", 19);
			q += 19;
			q += gb_numfmt_dec(q, vcpu);
			memcpy(q, f->s, f->n);
			f->exec_n = (uint32_t)(q - f->exec) + f->n;
			f->exec_vcpu = vcpu + 1;
		}
		memcpy(p, f->exec, 64);
		p += f->exec_n;
		p += gb_numfmt_ctr_put(&t->vt, p, vt);
		memcpy(p, "}\n", 2);
		p += 2;
	}
	struct acc_heads *h = &w->heads;
	if (nacc && h->vcpu != vcpu + 1) {
		for (int wr = 0; wr < 2; wr++) {
			char *q = h->s[wr], *q0 = q;
			if (wr)
				memcpy(q, "{\"t\":\"write\",\"vcpu\":", 20), q += 20;
			else
				memcpy(q, "{\"t\":\"read\",\"vcpu\":", 19), q += 19;
			q += gb_numfmt_dec(q, vcpu);
			memcpy(q, ",\"addr\":\"", 9);
			h->n[wr] = (uint32_t)(q + 9 - q0);
		}
		h->vcpu = vcpu + 1;
	}
	for (int k = 0; k < nacc; k++) {
		unsigned wr = acc[k].write;
		if (wr)
			w->c.writes++;
		else
			w->c.reads++;
		memcpy(p, h->s[wr], 48);
		p += h->n[wr];
		p += gb_numfmt_hex(p, acc[k].addr);
		PUT("\",\"size\":");
		p += fmt_small(p, acc[k].size);
		memcpy(p, f->s, 32);
		p += f->n;
		p += gb_numfmt_ctr_put(&t->vt, p, vt);
		memcpy(p, "}\n", 2);
		p += 2;
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
	free(w->pcs);
	free(w);
}
