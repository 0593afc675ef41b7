/* A trace as a stream of normalised instruction groups (stream.h). */
#include "tdiff/stream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "record/treader.h"
#include "tdiff/norm.h"

struct gb_tgroups {
	struct gb_treader *rd;
	enum gb_norm norm;
	struct gb_norm_counts *counts;
	struct gb_norm_state st;
	struct gb_trec pending;    /* the line that starts the next group */
	bool has_pending, eof;
	uint64_t recno;
};

struct gb_tgroups *gb_tgroups__new(struct gb_treader *rd, enum gb_norm norm, struct gb_norm_counts *counts)
{
	struct gb_tgroups *s = calloc(1, sizeof(*s));
	if (!s) {
		gb_err("diff: out of memory");
		return NULL;
	}
	s->rd = rd;
	s->norm = norm;
	s->counts = counts;
	s->st.vt = -1;
	return s;
}

/* The next line as a record: 1, 0 at the end, -errno.  A regs line
 * (--values) is no record: a register file at a stretch's start, which two
 * runs need not share (docs/diff.md "Values"). */
static int read_rec(struct gb_tgroups *s, struct gb_trec *x)
{
	const char *line;
	size_t len;
	int r;
	do {
		if ((r = gb_treader__next(s->rd, &line, &len)) <= 0)
			return r;
		memset(x, 0, sizeof(*x));
		x->lineno = gb_treader__lineno(s->rd);
		if (gb_tline_parse(line, len, &x->l))
			return gb_fail(-EINVAL, "%s:%ld: not a trace line (a JSON object with \"t\")",
				       gb_treader__name(s->rd), x->lineno);
	} while (x->l.type == GB_TL_REGS);
	if (x->l.type == GB_TL_OTHER || x->l.type == GB_TL_SUMMARY) {
		if (!(x->raw = strndup(line, len)))
			return gb_fail(-ENOMEM, "%s: out of memory", gb_treader__name(s->rd));
	}
	if ((x->l.val && !(x->val = strndup(x->l.val, x->l.val_len))) ||
	    (x->l.regs && !(x->regs = strndup(x->l.regs, x->l.regs_len)))) {
		gb_trec_release(x);
		return gb_fail(-ENOMEM, "%s: out of memory", gb_treader__name(s->rd));
	}
	x->l.val = x->l.regs = NULL; /* (into the reader's buffer) */
	return 1;
}

/* Does x continue the instruction group g? */
static bool continues(const struct gb_tgroup *g, const struct gb_trec *x)
{
	if (!g->n || !(gb_tline_is_access(&x->l) || x->l.type == GB_TL_FAULT))
		return false;
	const struct gb_tline *f = &g->r[0].l;
	if (f->type == GB_TL_OTHER || f->type == GB_TL_SUMMARY)
		return false;
	return f->vcpu == x->l.vcpu && f->pc == x->l.pc && f->vt == x->l.vt;
}

int gb_tgroups__next(struct gb_tgroups *s, struct gb_tgroup *g)
{
	for (;;) {
		gb_tgroup_clear(g);
		if (!s->has_pending && !s->eof) {
			int r = read_rec(s, &s->pending);
			if (r < 0)
				return r;
			s->has_pending = r > 0;
			s->eof = r == 0;
		}
		if (!s->has_pending)
			return 0;
		g->recno = s->recno;
		if (gb_tgroup_push(g, &s->pending))
			return -ENOMEM;
		s->has_pending = false;
		while (!s->eof) {
			struct gb_trec x;
			int r = read_rec(s, &x);
			if (r < 0)
				return r;
			if (!r) {
				s->eof = true;
				break;
			}
			if (!continues(g, &x)) {
				s->pending = x;
				s->has_pending = true;
				break;
			}
			if (gb_tgroup_push(g, &x)) {
				gb_trec_release(&x);
				return -ENOMEM;
			}
		}
		if (gb_norm_group(s->norm, g, &s->st, s->counts) && g->n) {
			s->recno += g->n;
			return 1;
		}
	}
}

void gb_tgroups__free(struct gb_tgroups *s)
{
	if (!s)
		return;
	if (s->has_pending)
		gb_trec_release(&s->pending);
	free(s);
}
