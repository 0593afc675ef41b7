/* Windows of groups, rebased comparison and resynchronisation (align.h). */
#include "tdiff/align.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "tdiff/stream.h"

struct gb_raddr gb_rebase(const struct gb_regions *rs, uint64_t addr)
{
	const struct gb_region *r = rs ? gb_regions_find(rs, addr) : NULL;
	if (!r)
		return (struct gb_raddr){ 0, (int64_t)addr };
	return (struct gb_raddr){ r->index + 1, (int64_t)(addr - r->anchor) };
}

static bool has_addr(const struct gb_tline *l)
{
	return gb_tline_is_access(l) || l->type == GB_TL_FAULT;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 31);
}

static uint64_t group_hash(const struct gb_tgroup *g, const struct gb_regions *rs, const struct gb_cmp_opts *o)
{
	uint64_t h = g->n;
	for (size_t i = 0; i < g->n; i++) {
		const struct gb_trec *x = &g->r[i];
		const struct gb_tline *l = &x->l;
		h = mix(h, l->type);
		if (x->raw) {
			for (const char *p = x->raw; *p; p++)
				h = mix(h, (unsigned char)*p);
			continue;
		}
		if (!o->ignore_vcpu)
			h = mix(h, (uint64_t)l->vcpu);
		struct gb_raddr pc = gb_rebase(o->rebase ? rs : NULL, l->pc);
		h = mix(mix(h, pc.region), (uint64_t)pc.off);
		if (has_addr(l)) {
			struct gb_raddr a = gb_rebase(o->rebase ? rs : NULL, l->addr);
			h = mix(mix(h, a.region), (uint64_t)a.off);
		}
		h = mix(mix(mix(h, (uint64_t)l->size), l->has_err), l->err);
	}
	return h;
}

bool gb_rec_equal(const struct gb_trec *x, const struct gb_regions *ra, const struct gb_trec *y,
		  const struct gb_regions *rb, const struct gb_cmp_opts *o)
{
	const struct gb_tline *a = &x->l, *b = &y->l;
	if (a->type != b->type || !x->raw != !y->raw)
		return false;
	if (x->raw)
		return !strcmp(x->raw, y->raw);
	if ((!o->ignore_vcpu && a->vcpu != b->vcpu) || a->size != b->size || a->has_err != b->has_err ||
	    a->err != b->err)
		return false;
	if (!o->rebase) {
		ra = NULL;
		rb = NULL;
	}
	struct gb_raddr pa = gb_rebase(ra, a->pc), pb = gb_rebase(rb, b->pc);
	if (pa.region != pb.region || pa.off != pb.off)
		return false;
	if (!has_addr(a))
		return true;
	pa = gb_rebase(ra, a->addr);
	pb = gb_rebase(rb, b->addr);
	return pa.region == pb.region && pa.off == pb.off;
}

bool gb_group_equal(const struct gb_tgroup *x, const struct gb_regions *ra, const struct gb_tgroup *y,
		    const struct gb_regions *rb, const struct gb_cmp_opts *o)
{
	if (x->n != y->n)
		return false;
	for (size_t i = 0; i < x->n; i++)
		if (!gb_rec_equal(&x->r[i], ra, &y->r[i], rb, o))
			return false;
	return true;
}

int gb_tside_init(struct gb_tside *s, struct gb_tgroups *gs, const struct gb_regions *rs, size_t cap)
{
	memset(s, 0, sizeof(*s));
	s->gs = gs;
	s->rs = rs;
	s->cap = cap;
	s->ring = calloc(cap, sizeof(*s->ring));
	s->hash = calloc(cap, sizeof(*s->hash));
	if (!s->ring || !s->hash)
		return gb_fail(-ENOMEM, "diff: out of memory (a window of %zu groups)", cap);
	return 0;
}

void gb_tside_free(struct gb_tside *s)
{
	for (size_t i = 0; s->ring && i < s->cap; i++)
		gb_tgroup_free(&s->ring[i]);
	gb_tgroup_free(&s->prev);
	free(s->ring);
	free(s->hash);
	memset(s, 0, sizeof(*s));
}

int gb_tside_fill(struct gb_tside *s, size_t n, const struct gb_cmp_opts *o)
{
	if (n > s->cap)
		n = s->cap;
	while (s->count < n && !s->eof) {
		size_t slot = (s->head + s->count) % s->cap;
		struct gb_tgroup *g = &s->ring[slot];
		int r = gb_tgroups__next(s->gs, g);
		if (r < 0)
			return r;
		if (!r) {
			s->eof = true;
			break;
		}
		s->hash[slot] = group_hash(g, o->rebase ? s->rs : NULL, o);
		s->count++;
		s->groups++;
		s->records += g->n;
		for (size_t i = 0; i < g->n; i++)
			s->per_type[g->r[i].l.type]++;
	}
	return 0;
}

struct gb_tgroup *gb_tside_at(struct gb_tside *s, size_t i)
{
	return &s->ring[(s->head + i) % s->cap];
}

uint64_t gb_tside_hash(const struct gb_tside *s, size_t i)
{
	return s->hash[(s->head + i) % s->cap];
}

void gb_tside_pop(struct gb_tside *s, size_t n)
{
	if (n > s->count)
		n = s->count;
	if (!n)
		return;
	/* The previous group matters to the hints (lackey's REP exec): swap
	 * storage rather than copy. */
	struct gb_tgroup *last = gb_tside_at(s, n - 1), t = s->prev;
	s->prev = *last;
	*last = t;
	gb_tgroup_clear(last);
	s->has_prev = true;
	s->head = (s->head + n) % s->cap;
	s->count -= n;
}

/* Do the sync groups from (da, db) agree, or do both traces end there? */
static bool agree(struct gb_tside *a, struct gb_tside *b, size_t da, size_t db, size_t sync,
		  const struct gb_cmp_opts *o)
{
	for (size_t k = 0; k < sync; k++) {
		size_t ia = da + k, ib = db + k;
		bool ea = ia >= a->count, eb = ib >= b->count;
		if (ea || eb)
			return ea && eb && a->eof && b->eof;
		if (gb_tside_hash(a, ia) != gb_tside_hash(b, ib) ||
		    !gb_group_equal(gb_tside_at(a, ia), a->rs, gb_tside_at(b, ib), b->rs, o))
			return false;
	}
	return true;
}

bool gb_resync(struct gb_tside *a, struct gb_tside *b, size_t window, size_t sync,
	       const struct gb_cmp_opts *o, size_t *da, size_t *db)
{
	size_t na = a->count < window ? a->count : window;
	size_t nb = b->count < window ? b->count : window;
	size_t best = SIZE_MAX;
	/* The near points first: most divergences are one or two groups. */
	for (size_t s = 1; s <= 6 && best == SIZE_MAX; s++)
		for (size_t i = 0; i <= s; i++)
			if (i <= na && s - i <= nb && agree(a, b, i, s - i, sync, o)) {
				*da = i;
				*db = s - i;
				return true;
			}
	/* Then every point of the windows, through a table of B's groups by
	 * hash (ascending positions in each chain). */
	size_t tsize = 64;
	while (tsize < 2 * (nb + 1))
		tsize *= 2;
	int32_t *head = malloc(tsize * sizeof(*head)), *next = malloc((nb + 1) * sizeof(*next));
	if (!head || !next) {
		free(head);
		free(next);
		return false;
	}
	memset(head, 0xff, tsize * sizeof(*head));
	for (size_t j = nb; j-- > 0;) {
		size_t h = gb_tside_hash(b, j) & (tsize - 1);
		next[j] = head[h];
		head[h] = (int32_t)j;
	}
	size_t work = 64 * (window + 1);
	for (size_t i = 0; i <= na && i < best && work; i++) {
		if (i == a->count && a->eof && b->eof && i + b->count < best) {
			best = i + b->count;   /* both ends */
			*da = i;
			*db = b->count;
		}
		if (i >= a->count)
			break;
		uint64_t ha = gb_tside_hash(a, i);
		for (int32_t j = head[ha & (tsize - 1)]; j >= 0 && work; j = next[j], work--) {
			if (i + (size_t)j >= best)
				break;
			if ((i || j) && gb_tside_hash(b, (size_t)j) == ha && agree(a, b, i, (size_t)j, sync, o)) {
				best = i + (size_t)j;
				*da = i;
				*db = (size_t)j;
				break;
			}
		}
	}
	if (best == SIZE_MAX && a->eof && b->eof && a->count <= window && b->count <= window) {
		*da = a->count;   /* the rest of both differs: their ends agree */
		*db = b->count;
		best = a->count + b->count;
	}
	free(head);
	free(next);
	return best != SIZE_MAX;
}
