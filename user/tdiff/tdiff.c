/* gebpf diff of two traces: passes, the comparison loop, the kinds of
 * divergence (tdiff.h, docs/diff.md). */
#include "tdiff/tdiff.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "record/treader.h"
#include "tdiff/align.h"
#include "tdiff/bin.h"
#include "tdiff/group.h"
#include "tdiff/regions.h"
#include "tdiff/report.h"
#include "tdiff/stream.h"

/* Pass 1: the regions of one trace, as normalised (a normalisation can
 * reorder a trace's first touches: CMPS's pair). */
static int find_regions(struct gb_treader *rd, enum gb_norm norm, struct gb_regions *rs)
{
	struct gb_tgroups *gs = gb_tgroups__new(rd, norm, NULL);
	struct gb_tgroup g = { 0 };
	int r = gs ? 0 : -ENOMEM;
	while (!r && (r = gb_tgroups__next(gs, &g)) > 0) {
		r = 0;
		for (size_t i = 0; i < g.n && !r; i++) {
			const struct gb_tline *l = &g.r[i].l;
			if (g.r[i].raw)
				continue;
			r = gb_regions_touch(rs, l->pc);
			if (!r && (gb_tline_is_access(l) || l->type == GB_TL_FAULT))
				r = gb_regions_touch(rs, l->addr);
		}
	}
	gb_tgroup_free(&g);
	gb_tgroups__free(gs);
	if (!r)
		r = gb_treader__rewind(rd);
	gb_regions_finish(rs);
	return r;
}

/* 0, or -errno when the --maps file cannot be read (printed). */
static int name_regions(struct gb_regions *rs, const char *file, const char *meta_maps)
{
	char *text = NULL;
	if (file) {
		FILE *f = fopen(file, "re");
		size_t cap = 0;
		if (!f)
			return gb_fail(-errno, "diff: %s: %s", file, strerror(errno));
		errno = 0;
		ssize_t n = getdelim(&text, &cap, '\0', f);
		bool bad = n < 0 && ferror(f);
		int e = errno ? errno : EIO;
		fclose(f);
		if (n < 0) {
			free(text);
			text = NULL;   /* an empty file: no names */
		}
		if (bad)
			return gb_fail(-e, "diff: %s: %s", file, strerror(e));
	}
	gb_regions_name(rs, text ? text : meta_maps);
	free(text);
	return 0;
}

/* The first record where the pair differs, and whether one's list is the
 * other's with records added (1: b has extra, -1: a has extra). */
static size_t first_diff(const struct gb_tgroup *x, const struct gb_regions *ra, const struct gb_tgroup *y,
			 const struct gb_regions *rb, const struct gb_cmp_opts *o, int *sub)
{
	size_t i = 0;
	while (i < x->n && i < y->n && gb_rec_equal(&x->r[i], ra, &y->r[i], rb, o))
		i++;
	*sub = 0;
	for (int s = 0; s < 2; s++) {   /* s 0: is x inside y */
		const struct gb_tgroup *small = s ? y : x, *big = s ? x : y;
		const struct gb_regions *rsm = s ? rb : ra, *rbg = s ? ra : rb;
		if (small->n >= big->n)
			continue;
		size_t j = 0;
		for (size_t k = 0; k < big->n && j < small->n; k++)
			j += gb_rec_equal(&small->r[j], rsm, &big->r[k], rbg, o);
		if (j == small->n)
			*sub = s ? -1 : 1;
	}
	return i;
}

static enum gb_dkind classify(struct gb_tside *a, struct gb_tside *b, size_t da, size_t db,
			      const struct gb_cmp_opts *o, size_t *rec)
{
	*rec = 0;
	if (!da || !db) {
		const struct gb_tgroup *g = da ? gb_tside_at(a, 0) : gb_tside_at(b, 0);
		if (!gb_tgroup_is_insn(g))
			return GB_D_LINE;
		return da ? GB_D_INSN_MISSING : GB_D_INSN_EXTRA;
	}
	const struct gb_tgroup *x = gb_tside_at(a, 0), *y = gb_tside_at(b, 0);
	if (!gb_tgroup_is_insn(x) || !gb_tgroup_is_insn(y))
		return GB_D_LINE;
	struct gb_raddr pa = gb_rebase(o->rebase ? a->rs : NULL, x->r[0].l.pc);
	struct gb_raddr pb = gb_rebase(o->rebase ? b->rs : NULL, y->r[0].l.pc);
	if (pa.region != pb.region || pa.off != pb.off) {
		/* Instructions added at the start of one side's span, then the
		 * same pc again on both. */
		size_t k = da < db ? db - da : da - db;
		const struct gb_tgroup *z = da < db ? gb_tside_at(b, k) : gb_tside_at(a, k);
		const struct gb_tgroup *w = da < db ? x : y;
		struct gb_raddr pz = gb_rebase(o->rebase ? (da < db ? b->rs : a->rs) : NULL, z->r[0].l.pc);
		struct gb_raddr pw = gb_rebase(o->rebase ? (da < db ? a->rs : b->rs) : NULL, w->r[0].l.pc);
		if (da != db && gb_tgroup_is_insn(z) && pz.region == pw.region && pz.off == pw.off)
			return da < db ? GB_D_INSN_EXTRA : GB_D_INSN_MISSING;
		return GB_D_FLOW;
	}
	if (da != db)
		return da < db ? GB_D_INSN_EXTRA : GB_D_INSN_MISSING;
	int sub;
	*rec = first_diff(x, a->rs, y, b->rs, o, &sub);
	if (sub)
		return sub > 0 ? GB_D_ACCESS_EXTRA : GB_D_ACCESS_MISSING;
	const struct gb_trec *rx = *rec < x->n ? &x->r[*rec] : NULL, *ry = *rec < y->n ? &y->r[*rec] : NULL;
	if ((rx && gb_tline_is_access(&rx->l)) || (ry && gb_tline_is_access(&ry->l)))
		return GB_D_ACCESS;
	return GB_D_LINE;
}

/* Do the first n groups of both sides start at the same (rebased) pcs? */
static bool same_pcs(struct gb_tside *a, struct gb_tside *b, size_t n, const struct gb_cmp_opts *o)
{
	for (size_t i = 0; i < n; i++) {
		const struct gb_tgroup *x = gb_tside_at(a, i), *y = gb_tside_at(b, i);
		if (!gb_tgroup_is_insn(x) || !gb_tgroup_is_insn(y))
			return false;
		struct gb_raddr pa = gb_rebase(o->rebase ? a->rs : NULL, x->r[0].l.pc);
		struct gb_raddr pb = gb_rebase(o->rebase ? b->rs : NULL, y->r[0].l.pc);
		if (pa.region != pb.region || pa.off != pb.off)
			return false;
	}
	return true;
}

static int64_t group_vt(struct gb_tside *s)
{
	const struct gb_tgroup *g = gb_tside_at(s, 0);
	return gb_tgroup_is_insn(g) ? g->r[0].l.vt : INT64_MIN;
}

/* Compare until both ends.  0 or -errno. */
static int compare(struct gb_tside *a, struct gb_tside *b, const struct gb_tdiff_opts *o,
		   const struct gb_cmp_opts *co, struct gb_treport *rep)
{
	size_t window = (size_t)o->window, sync = (size_t)o->sync;
	int64_t dvt = 0;
	int r;
	for (;;) {
		if ((r = gb_tside_fill(a, 1, co)) || (r = gb_tside_fill(b, 1, co)))
			return r;
		if (!a->count && !b->count)
			return 0;
		if (a->count && b->count && gb_tside_hash(a, 0) == gb_tside_hash(b, 0) &&
		    gb_group_equal(gb_tside_at(a, 0), a->rs, gb_tside_at(b, 0), b->rs, co)) {
			int64_t va = group_vt(a), vb = group_vt(b);
			if (!o->ignore_vt && va != INT64_MIN && vb != INT64_MIN && vb - va != dvt) {
				struct gb_div d = { .kind = GB_D_VT, .a = a, .b = b, .na = 1, .nb = 1 };
				gb_treport__divergence(rep, &d);
				dvt = vb - va;
			}
			gb_treport__values(rep, gb_tside_at(a, 0), gb_tside_at(b, 0));
			gb_treport__seen(rep, gb_tside_at(a, 0));
			gb_tside_pop(a, 1);
			gb_tside_pop(b, 1);
			continue;
		}
		if ((r = gb_tside_fill(a, window + sync, co)) || (r = gb_tside_fill(b, window + sync, co)))
			return r;
		struct gb_div d = { .a = a, .b = b };
		if (!a->count || !b->count) {   /* one trace ended: the rest of the other */
			struct gb_tside *s = a->count ? a : b;
			d.na = a->count;
			d.nb = b->count;
			d.kind = classify(a, b, d.na, d.nb, co, &d.rec);
			gb_treport__divergence(rep, &d);
			while (s->count) {
				gb_tside_pop(s, s->count);
				if ((r = gb_tside_fill(s, window, co)))
					return r;
			}
			return 0;
		}
		if (!gb_resync(a, b, window, sync, co, &d.na, &d.nb)) {
			d.no_resync = true;
			d.na = a->count < window ? a->count : window;
			d.nb = b->count < window ? b->count : window;
		}
		if (d.na == d.nb && same_pcs(a, b, d.na, co)) {
			/* The same instructions (also when no resynchronisation was found
			 * in the window): each pair that differs is one divergence. */
			for (size_t i = 0; i < d.na; i++) {
				struct gb_div p = { .a = a, .b = b, .na = 1, .nb = 1 };
				if (gb_tside_hash(a, 0) == gb_tside_hash(b, 0) &&
				    gb_group_equal(gb_tside_at(a, 0), a->rs, gb_tside_at(b, 0), b->rs, co)) {
					gb_treport__values(rep, gb_tside_at(a, 0), gb_tside_at(b, 0));
					gb_treport__seen(rep, gb_tside_at(a, 0));
				} else {
					p.kind = classify(a, b, 1, 1, co, &p.rec);
					gb_treport__divergence(rep, &p);
				}
				gb_tside_pop(a, 1);
				gb_tside_pop(b, 1);
			}
		} else {
			d.kind = classify(a, b, d.na, d.nb, co, &d.rec);
			gb_treport__divergence(rep, &d);
			gb_tside_pop(a, d.na);
			gb_tside_pop(b, d.nb);
		}
		if ((r = gb_tside_fill(a, 1, co)) || (r = gb_tside_fill(b, 1, co)))
			return r;
		if (a->count && b->count && group_vt(a) != INT64_MIN && group_vt(b) != INT64_MIN)
			dvt = group_vt(b) - group_vt(a);
	}
}

static void say_rules(const struct gb_tdiff_opts *o, const struct gb_norm_counts nc[2], const char *na,
		      const char *nb)
{
	char buf[2][512];
	for (int s = 0; s < 2; s++) {
		int n = 0;
		buf[s][0] = 0;
		for (int k = 0; k < GB_RULE_N; k++)
			if (gb_norm_rule_on(o->norm, k))
				n += snprintf(buf[s] + n, sizeof(buf[s]) - (size_t)n, "%s%s %llu", n ? ", " : "",
					      gb_norm_rule_name(k), (unsigned long long)nc[s].n[k]);
	}
	fprintf(stderr, "gebpf: diff: --normalise %s changed %s: %s; %s: %s\n", gb_norm_name(o->norm), na, buf[0],
		nb, buf[1]);
}

int gb_tdiff(struct gb_treader *ra, struct gb_treader *rb, const struct gb_tdiff_opts *o, FILE *out)
{
	struct gb_regions reg[2];
	struct gb_norm_counts nc[2];
	struct gb_tgroups *gs[2] = { NULL, NULL };
	struct gb_tside side[2];
	struct gb_tbin *bin = NULL;
	struct gb_treport *rep = NULL;
	struct gb_cmp_opts co = { .ignore_vcpu = o->ignore_vcpu, .rebase = !o->no_rebase };
	struct gb_treader *rd[2] = { ra, rb };
	char note[256];
	int r = 0;
	memset(side, 0, sizeof(side));
	memset(nc, 0, sizeof(nc));
	for (int s = 0; s < 2; s++)
		gb_regions_init(&reg[s], o->region_gap ? o->region_gap : GB_REGION_GAP);
	for (int s = 0; s < 2 && co.rebase && !r; s++) {
		r = find_regions(rd[s], o->norm, &reg[s]);
		if (!r)
			r = name_regions(&reg[s], o->maps[s], gb_treader__maps(rd[s]));
	}
	if (r)
		goto cleanup;
	if (co.rebase && reg[0].n != reg[1].n)
		snprintf(note, sizeof(note), "addresses rebased per region (A %zu, B %zu regions: not as many, "
			 "two mappings may be closer than --region-gap on one side, try a smaller one; "
			 "--no-rebase compares raw addresses)", reg[0].n, reg[1].n);
	else if (co.rebase)
		snprintf(note, sizeof(note), "addresses rebased per region (A %zu, B %zu regions; --no-rebase "
			 "compares raw addresses)", reg[0].n, reg[1].n);
	else
		snprintf(note, sizeof(note), "raw addresses (--no-rebase)");
	const char *binpath = o->binary ? o->binary : gb_treader__binary(ra) ? gb_treader__binary(ra)
									  : gb_treader__binary(rb);
	if (binpath && !(bin = gb_tbin__open(binpath, o->binary != NULL)) && o->binary) {
		r = -EINVAL;
		goto cleanup;
	}
	size_t cap = (size_t)o->window + (size_t)o->sync + 1;
	for (int s = 0; s < 2; s++) {
		if (!(gs[s] = gb_tgroups__new(rd[s], o->norm, &nc[s]))) {
			r = -ENOMEM;
			goto cleanup;
		}
		if ((r = gb_tside_init(&side[s], gs[s], co.rebase ? &reg[s] : NULL, cap)))
			goto cleanup;
	}
	struct gb_treport_opts ro = {
		.name_a = gb_treader__name(ra), .name_b = gb_treader__name(rb), .json = o->json,
		.ignore_vt = o->ignore_vt, .ignore_vcpu = o->ignore_vcpu, .context = o->context,
		.max_diffs = o->max_diffs, .norm = o->norm, .cmp = &co, .bin = bin, .note = note,
		.ra = co.rebase ? &reg[0] : NULL, .rb = co.rebase ? &reg[1] : NULL,
		.ignore_values = o->ignore_values,
	};
	if (!(rep = gb_treport__new(&ro, out))) {
		r = gb_fail(-ENOMEM, "diff: out of memory");
		goto cleanup;
	}
	if ((r = compare(&side[0], &side[1], o, &co, rep)))
		goto cleanup;
	r = gb_treport__finish(rep, &side[0], &side[1], nc) ? 1 : 0;
	if (o->norm && !o->json)
		say_rules(o, nc, ro.name_a, ro.name_b);
cleanup:
	gb_treport__free(rep);
	for (int s = 0; s < 2; s++) {
		gb_tside_free(&side[s]);
		gb_tgroups__free(gs[s]);
		gb_regions_free(&reg[s]);
	}
	gb_tbin__free(bin);
	return r;
}
