/* gebpf diff's report: divergences in detail, then the summary (report.h). */
#include "tdiff/report.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tdiff/bin.h"
#include "tdiff/report_int.h"

#define SHOWN_RECORDS 16

static const char *const kind_names[GB_D_N] = {
	[GB_D_ACCESS] = "access differs",
	[GB_D_ACCESS_MISSING] = "access missing in B",
	[GB_D_ACCESS_EXTRA] = "access extra in B",
	[GB_D_INSN_MISSING] = "instructions missing in B",
	[GB_D_INSN_EXTRA] = "instructions extra in B",
	[GB_D_FLOW] = "control flow differs",
	[GB_D_VT] = "vt differs",
	[GB_D_LINE] = "line differs",
	[GB_D_VALUE] = "value differs",
};

const char *gb_dkind_name(enum gb_dkind k)
{
	return kind_names[k];
}

const char *treport_kind_name(enum gb_dkind k)
{
	return kind_names[k];
}

struct gb_treport *gb_treport__new(const struct gb_treport_opts *o, FILE *out)
{
	struct gb_treport *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->o = *o;
	r->out = out;
	if (o->context > 0 && !(r->hist = calloc((size_t)o->context, sizeof(*r->hist)))) {
		free(r);
		return NULL;
	}
	if (o->json) {
		r->doc = cJSON_CreateObject();
		r->divs = cJSON_CreateArray();
		if (!r->doc || !r->divs) {
			gb_treport__free(r);
			return NULL;
		}
	}
	return r;
}

void gb_treport__seen(struct gb_treport *r, const struct gb_tgroup *g)
{
	size_t cap = (size_t)r->o.context;
	for (size_t i = 0; cap && i < g->n; i++) {
		struct gb_trec *slot = &r->hist[r->hist_head];
		gb_trec_release(slot);
		*slot = g->r[i];
		gb_trec_dup(slot); /* (out of memory: shown without its strings) */
		r->hist_head = (r->hist_head + 1) % cap;
		if (r->hist_n < cap)
			r->hist_n++;
	}
}

/* The record as compared (and printed): canonical field order, ignored
 * fields left out. */
static void render(const struct gb_treport *r, const struct gb_trec *x, char *buf, size_t len)
{
	const struct gb_tline *l = &x->l;
	if (x->raw) {
		snprintf(buf, len, "%s", x->raw);
		return;
	}
	int n = snprintf(buf, len, "{\"t\":\"%s\"", gb_tline_names[l->type]);
#define ADD(...) n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, __VA_ARGS__)
	if (!r->o.ignore_vcpu)
		ADD(",\"vcpu\":%" PRId64, l->vcpu);
	if (l->type != GB_TL_EXEC)
		ADD(",\"addr\":\"0x%" PRIx64 "\"", l->addr);
	if (gb_tline_is_access(l))
		ADD(",\"size\":%" PRId64, l->size);
	if (x->val)
		ADD(",\"val\":\"%s\"", x->val);
	ADD(",\"pc\":\"0x%" PRIx64 "\"", l->pc);
	if (x->regs)
		ADD(",\"regs\":%s", x->regs);
	if (l->has_err)
		ADD(",\"err\":\"0x%" PRIx64 "\"", l->err);
	if (!r->o.ignore_vt)
		ADD(",\"vt\":%" PRId64, l->vt);
	ADD("}");
#undef ADD
}

/* "region 2 [stack]+0x10" for an address, when rebasing. */
static void where(const struct gb_treport *r, const struct gb_regions *rs, uint64_t addr, char *buf, size_t len)
{
	buf[0] = 0;
	const struct gb_region *g = r->o.cmp->rebase && rs ? gb_regions_find(rs, addr) : NULL;
	if (!g)
		return;
	int64_t off = (int64_t)(addr - g->anchor);
	snprintf(buf, len, "region %u%s%s%s %c0x%" PRIx64, g->index + 1, g->name[0] ? " " : "", g->name,
		 "", off < 0 ? '-' : '+', off < 0 ? (uint64_t)-off : (uint64_t)off);
}

static void print_side(struct gb_treport *r, struct gb_tside *s, size_t n, char mark, cJSON *arr)
{
	size_t shown = 0, more = 0;
	char line[2048], w[96];
	for (size_t i = 0; i < n; i++) {
		const struct gb_tgroup *g = gb_tside_at(s, i);
		for (size_t k = 0; k < g->n; k++) {
			if (shown >= SHOWN_RECORDS) {
				more++;
				continue;
			}
			render(r, &g->r[k], line, sizeof(line));
			if (arr) {
				cJSON_AddItemToArray(arr, cJSON_Parse(line) ?: cJSON_CreateString(line));
			} else {
				bool addr = gb_tline_is_access(&g->r[k].l) || g->r[k].l.type == GB_TL_FAULT;
				where(r, s->rs, g->r[k].l.addr, w, sizeof(w));
				fprintf(r->out, "    %c %s%s%s\n", mark, line, addr && w[0] ? "   # " : "",
					addr ? w : "");
			}
			shown++;
		}
	}
	if (more && !arr)
		fprintf(r->out, "    %c ... %zu more records\n", mark, more);
	if (!n && !arr)
		fprintf(r->out, "    %c (%s)\n", mark, s->count || !s->eof ? "nothing here" : "end of trace");
}

void treport_header(struct gb_treport *r)
{
	fprintf(r->out, "gebpf diff: - %s, + %s: %s\n", r->o.name_a, r->o.name_b, r->o.note);
	size_t n = r->o.ra && r->o.rb ? (r->o.ra->n > r->o.rb->n ? r->o.ra->n : r->o.rb->n) : 0;
	for (uint32_t i = 0; i < n && i < 8; i++) {
		const struct gb_region *x = gb_regions_by_index(r->o.ra, i), *y = gb_regions_by_index(r->o.rb, i);
		fprintf(r->out, "  region %u: ", i + 1);
		if (x)
			fprintf(r->out, "A 0x%" PRIx64 "-0x%" PRIx64 " anchor 0x%" PRIx64 "%s%s", x->lo, x->hi,
				x->anchor, x->name[0] ? " " : "", x->name);
		else
			fprintf(r->out, "A none");
		if (y)
			fprintf(r->out, ", B 0x%" PRIx64 "-0x%" PRIx64 " anchor 0x%" PRIx64 "%s%s\n", y->lo, y->hi,
				y->anchor, y->name[0] ? " " : "", y->name);
		else
			fprintf(r->out, ", B none\n");
	}
	if (n > 8)
		fprintf(r->out, "  ... %zu regions in all\n", n);
}


/* "sym+0xoff", or "0x<pc>" without a symbol, or "(not an instruction)". */
bool treport_describe(const struct gb_treport *r, uint64_t pc, char *buf, size_t len)
{
	if (pc == NO_PC) {
		snprintf(buf, len, "(a line that is not an instruction's)");
		return false;
	}
	return gb_tbin__symbol(r->o.bin, pc, buf, len);
}

static const struct gb_trec *first_rec(struct gb_tside *s, size_t n, size_t rec)
{
	if (!n)
		return NULL;
	const struct gb_tgroup *g = gb_tside_at(s, 0);
	return rec < g->n ? &g->r[rec] : g->n ? &g->r[g->n - 1] : NULL;
}

void gb_treport__divergence(struct gb_treport *r, const struct gb_div *d)
{
	const struct gb_trec *xa = first_rec(d->a, d->na, d->rec), *xb = first_rec(d->b, d->nb, d->rec);
	const struct gb_trec *x = d->kind == GB_D_INSN_EXTRA && xb ? xb : xa ? xa : xb;
	bool line = !x || x->raw;   /* a summary or other line: no pc */
	uint64_t pc = line ? NO_PC : x->l.pc;
	char sym[256], dis[160], mnem[32];
	treport_describe(r, pc, sym, sizeof(sym));
	gb_tbin__disasm(r->o.bin, line ? 0 : pc, dis, sizeof(dis), mnem, sizeof(mnem));
	struct gb_hint_in hi = {
		.na = d->no_resync ? 2 : d->na, .nb = d->no_resync ? 2 : d->nb,
		.prev_a = d->a->has_prev ? &d->a->prev : NULL, .prev_b = d->b->has_prev ? &d->b->prev : NULL,
		.ra = d->a->rs, .rb = d->b->rs, .o = r->o.cmp, .mnem = mnem,
	};
	for (size_t i = 0; i < 2; i++) {
		hi.a[i] = i < d->na ? gb_tside_at(d->a, i) : NULL;
		hi.b[i] = i < d->nb ? gb_tside_at(d->b, i) : NULL;
	}
	char syma[256], symb[256];
	if (hi.a[0] && hi.a[0]->n && gb_tbin__symbol(r->o.bin, hi.a[0]->r[0].l.pc, syma, sizeof(syma))) {
		hi.sym_a = syma;
		hi.ifunc_a = gb_tbin__in_ifunc(r->o.bin, hi.a[0]->r[0].l.pc);
	}
	if (hi.b[0] && hi.b[0]->n && gb_tbin__symbol(r->o.bin, hi.b[0]->r[0].l.pc, symb, sizeof(symb))) {
		hi.sym_b = symb;
		hi.ifunc_b = gb_tbin__in_ifunc(r->o.bin, hi.b[0]->r[0].l.pc);
	}
	enum gb_quirk q = gb_hint_find(&hi);
	const struct gb_quirk_info *qi = gb_quirk_info(q);
	unsigned long idx = r->total++;
	if (r->per_kind[d->kind] < FIRST_PCS)
		r->first_pc[d->kind][r->per_kind[d->kind]] = pc;
	r->per_kind[d->kind]++;
	r->per_quirk[q]++;
	if ((long)idx >= r->o.max_diffs)
		return;
	uint64_t recno = (d->na ? gb_tside_at(d->a, 0)->recno : d->nb ? gb_tside_at(d->b, 0)->recno : 0) +
			 d->rec + 1;
	long la = xa ? xa->lineno : -1, lb = xb ? xb->lineno : -1;
	if (r->doc) {
		cJSON *j = cJSON_CreateObject();
		char hex[24];
		snprintf(hex, sizeof(hex), line ? "" : "0x%" PRIx64, pc);
		cJSON_AddStringToObject(j, "kind", kind_names[d->kind]);
		cJSON_AddNumberToObject(j, "record", (double)recno);
		cJSON_AddNumberToObject(j, "a_line", (double)la);
		cJSON_AddNumberToObject(j, "b_line", (double)lb);
		cJSON_AddStringToObject(j, "pc", hex);
		cJSON_AddStringToObject(j, "symbol", sym);
		cJSON_AddStringToObject(j, "insn", dis);
		cJSON_AddNumberToObject(j, "a_groups", (double)(d->na + d->more_a));
		cJSON_AddNumberToObject(j, "b_groups", (double)(d->nb + d->more_b));
		cJSON_AddBoolToObject(j, "resynchronised", !d->no_resync);
		print_side(r, d->a, d->na, '-', cJSON_AddArrayToObject(j, "a"));
		print_side(r, d->b, d->nb, '+', cJSON_AddArrayToObject(j, "b"));
		if (qi) {
			cJSON *h = cJSON_AddObjectToObject(j, "hint");
			cJSON_AddStringToObject(h, "quirk", qi->name);
			cJSON_AddStringToObject(h, "what", qi->what);
			if (qi->normalise)
				cJSON_AddStringToObject(h, "normalise", qi->normalise);
			else
				cJSON_AddNullToObject(h, "normalise");
			if (qi->advice)
				cJSON_AddStringToObject(h, "advice", qi->advice);
		}
		cJSON_AddItemToArray(r->divs, j);
		return;
	}
	if (!idx)
		treport_header(r);
	char pcs[32] = "";
	if (!line && strncmp(sym, "0x", 2))
		snprintf(pcs, sizeof(pcs), " (0x%" PRIx64 ")", pc);
	char las[24] = "end", lbs[24] = "end";
	if (la >= 0)
		snprintf(las, sizeof(las), "%ld", la);
	if (lb >= 0)
		snprintf(lbs, sizeof(lbs), "%ld", lb);
	fprintf(r->out, "[%lu] %s at %s%s, record %" PRIu64 " (A line %s, B line %s)%s\n", idx + 1,
		kind_names[d->kind], sym, pcs, recno, las, lbs,
		d->no_resync ? ": no resynchronisation within the window" : "");
	if (dis[0])
		fprintf(r->out, "    %s\n", dis);
	if (d->kind == GB_D_FLOW && xa && xb && xb->l.pc != xa->l.pc) {
		char sb[256], db[160];
		gb_tbin__symbol(r->o.bin, xb->l.pc, sb, sizeof(sb));
		gb_tbin__disasm(r->o.bin, xb->l.pc, db, sizeof(db), NULL, 0);
		fprintf(r->out, "    B is at %s (0x%" PRIx64 ")%s%s\n", sb, xb->l.pc, db[0] ? ": " : "", db);
	}
	char text[2048];
	for (size_t i = 0; i < r->hist_n; i++) {
		size_t cap = (size_t)r->o.context;
		render(r, &r->hist[(r->hist_head + cap - r->hist_n + i) % cap], text, sizeof(text));
		fprintf(r->out, "      %s\n", text);
	}
	print_side(r, d->a, d->na, '-', NULL);
	if (d->more_a)
		fprintf(r->out, "    - ... %" PRIu64 " more groups to the end of A\n", d->more_a);
	print_side(r, d->b, d->nb, '+', NULL);
	if (d->more_b)
		fprintf(r->out, "    + ... %" PRIu64 " more groups to the end of B\n", d->more_b);
	if (qi)
		fprintf(r->out, "    hint: has the shape of %s: %s; %s%s%s%s%s\n", qi->name, qi->what,
			qi->normalise ? "--normalise " : "not normalised (gebpf diff cannot undo it)",
			qi->normalise ? qi->normalise : "", qi->normalise ? " undoes it" : "",
			qi->advice ? ": " : "", qi->advice ? qi->advice : "");
}

static void side_counts(FILE *out, char which, const char *name, const struct gb_tside *s)
{
	fprintf(out, "%c %s: exec %" PRIu64 ", read %" PRIu64 ", write %" PRIu64 ", fault %" PRIu64
		     ", lines %" PRIu64 "\n", which, name, s->per_type[GB_TL_EXEC], s->per_type[GB_TL_READ],
		s->per_type[GB_TL_WRITE], s->per_type[GB_TL_FAULT], s->records);
}

static cJSON *side_json(const char *name, const struct gb_tside *s, const struct gb_norm_counts *nc,
			enum gb_norm norm)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "name", name);
	cJSON_AddNumberToObject(j, "records", (double)s->records);
	cJSON_AddNumberToObject(j, "groups", (double)s->groups);
	for (int t = GB_TL_EXEC; t < GB_TL_NTYPES; t++)
		if (t != GB_TL_REGS) /* (not records: read past) */
			cJSON_AddNumberToObject(j, gb_tline_names[t], (double)s->per_type[t]);
	cJSON *rules = cJSON_AddObjectToObject(j, "rules");
	for (int k = 0; k < GB_RULE_N; k++)
		if (gb_norm_rule_on(norm, k))
			cJSON_AddNumberToObject(rules, gb_norm_rule_name(k), (double)nc->n[k]);
	return j;
}

unsigned long gb_treport__finish(struct gb_treport *r, const struct gb_tside *a, const struct gb_tside *b,
				 const struct gb_norm_counts nc[2])
{
	const char *rebase_note = r->o.note;
	char sym[256];
	if (r->doc) {
		cJSON_AddBoolToObject(r->doc, "identical", !r->total);
		cJSON_AddItemToObject(r->doc, "a", side_json(r->o.name_a, a, &nc[0], r->o.norm));
		cJSON_AddItemToObject(r->doc, "b", side_json(r->o.name_b, b, &nc[1], r->o.norm));
		cJSON_AddBoolToObject(r->doc, "rebase", r->o.cmp->rebase);
		cJSON_AddStringToObject(r->doc, "rebase_note", rebase_note);
		if (r->o.norm)
			cJSON_AddStringToObject(r->doc, "normalise", gb_norm_name(r->o.norm));
		else
			cJSON_AddNullToObject(r->doc, "normalise");
		cJSON_AddNumberToObject(r->doc, "divergences_total", (double)r->total);
		cJSON *c = cJSON_AddObjectToObject(r->doc, "counts");
		for (int k = 0; k < GB_D_N; k++) {
			if (!r->per_kind[k])
				continue;
			cJSON *e = cJSON_AddObjectToObject(c, kind_names[k]);
			cJSON_AddNumberToObject(e, "count", (double)r->per_kind[k]);
			cJSON *f = cJSON_AddArrayToObject(e, "first");
			for (unsigned long i = 0; i < r->per_kind[k] && i < FIRST_PCS; i++) {
				treport_describe(r, r->first_pc[k][i], sym, sizeof(sym));
				cJSON_AddItemToArray(f, cJSON_CreateString(sym));
			}
		}
		cJSON_AddNumberToObject(r->doc, "values_compared", (double)r->values_compared);
		treport_value_table(r, r->doc);
		treport_ignored_line(r, r->doc);
		cJSON *h = cJSON_AddObjectToObject(r->doc, "hints");
		for (int q = 1; q < GB_QUIRK_N; q++)
			if (r->per_quirk[q])
				cJSON_AddNumberToObject(h, gb_quirk_info(q)->name, (double)r->per_quirk[q]);
		cJSON_AddItemToObject(r->doc, "divergences", r->divs);
		r->divs = NULL;
		char *text = cJSON_PrintUnformatted(r->doc);
		if (text)
			fprintf(r->out, "%s\n", text);
		free(text);
		return r->total;
	}
	if (!r->total) {
		fprintf(r->out, "identical: %s and %s, %" PRIu64 " records%s; %s\n", r->o.name_a, r->o.name_b,
			a->records, r->values_compared ? ", values too" : "", rebase_note);
		treport_ignored_line(r, NULL);
		return 0;
	}
	if ((long)r->total > r->o.max_diffs)
		fprintf(r->out, "... %lu more divergences not shown (--max-diffs %ld)\n",
			r->total - (unsigned long)r->o.max_diffs, r->o.max_diffs);
	fprintf(r->out, "\nsummary: %lu divergence%s; %s%s%s\n", r->total, r->total == 1 ? "" : "s", rebase_note,
		r->o.norm ? "; normalised for " : "", r->o.norm ? gb_norm_name(r->o.norm) : "");
	fprintf(r->out, "  %-26s %8s  %s\n", "kind", "count", "first at");
	for (int k = 0; k < GB_D_N; k++) {
		if (!r->per_kind[k])
			continue;
		fprintf(r->out, "  %-26s %8lu  ", kind_names[k], r->per_kind[k]);
		for (unsigned long i = 0; i < r->per_kind[k] && i < FIRST_PCS; i++) {
			treport_describe(r, r->first_pc[k][i], sym, sizeof(sym));
			fprintf(r->out, "%s%s", i ? ", " : "", sym);
		}
		fprintf(r->out, "\n");
	}
	for (int q = 1; q < GB_QUIRK_N; q++) {
		const struct gb_quirk_info *qi = gb_quirk_info(q);
		if (r->per_quirk[q])
			fprintf(r->out, "  hint %-21s %8lu  %s%s\n", qi->name, r->per_quirk[q],
				qi->normalise ? "--normalise " : "not normalised",
				qi->normalise ? qi->normalise : "");
	}
	treport_value_table(r, NULL);
	treport_ignored_line(r, NULL);
	side_counts(r->out, '-', r->o.name_a, a);
	side_counts(r->out, '+', r->o.name_b, b);
	return r->total;
}

void gb_treport__free(struct gb_treport *r)
{
	if (!r)
		return;
	for (int i = 0; i < r->o.context && r->hist; i++)
		gb_trec_release(&r->hist[i]);
	free(r->hist);
	cJSON_Delete(r->divs);
	cJSON_Delete(r->doc);
	free(r->vpcs);
	free(r);
}
