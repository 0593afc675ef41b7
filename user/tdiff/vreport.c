/* gebpf diff's report of value divergences (report.h gb_treport__values;
 * values.h compares). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "decode/decode.h"
#include "tdiff/bin.h"
#include "tdiff/report_int.h"

/* The per-instruction count of value divergences at pc. */
static void count_vpc(struct gb_treport *r, uint64_t pc, const struct gb_vdiff *vd)
{
	if (!r->vpcs && !(r->vpcs = calloc(VPC_SLOTS, sizeof(*r->vpcs))))
		return;
	size_t h = (size_t)((pc * 0x9e3779b97f4a7c15ull) >> 54) % VPC_SLOTS;
	for (size_t k = 0; k < VPC_SLOTS; k++, h = (h + 1) % VPC_SLOTS) {
		struct vpc *v = &r->vpcs[h];
		if (v->count && v->pc != pc)
			continue;
		if (!v->count) {
			if (r->nvpcs + 1 >= VPC_SLOTS)
				return; /* (full: the first ones are counted) */
			r->nvpcs++;
			v->pc = pc;
			int n = 0;
			for (unsigned d = 0; d < vd->n && d < GB_VDIFF_SHOWN; d++)
				n += snprintf(v->regs + n, sizeof(v->regs) > (size_t)n ? sizeof(v->regs) - (size_t)n : 0,
					      "%s%s", d ? "," : "", vd->d[d].what);
		}
		v->count++;
		return;
	}
}

void gb_treport__values(struct gb_treport *r, const struct gb_tgroup *x, const struct gb_tgroup *y)
{
	if (!gb_tgroup_is_insn(x) || !x->n || !y->n)
		return;
	uint64_t pc = x->r[0].l.pc;
	struct gb_insn in;
	bool have = gb_tbin__decode(r->o.bin, pc, &in);
	struct gb_vdiff vd;
	const struct gb_regions *ra = r->o.cmp->rebase ? r->o.ra : NULL, *rb = r->o.cmp->rebase ? r->o.rb : NULL;
	if (!gb_values_compare(x, y, have ? &in : NULL, ra, rb, &r->vmem, &vd)) {
		r->values_compared += vd.any_values;
		return;
	}
	r->values_compared++;
	/* The kinds of its differences, each once, in order; left out when
	 * every difference is of a kind --ignore-values names. */
	enum gb_vkind kinds[GB_VDIFF_SHOWN];
	unsigned nk = 0;
	bool ignored = vd.all_kinds;
	for (unsigned d = 0; d < vd.n && d < GB_VDIFF_SHOWN; d++) {
		enum gb_vkind k = vd.d[d].kind;
		ignored &= k && (r->o.ignore_values >> k & 1);
		bool have = !k;
		for (unsigned j = 0; j < nk; j++)
			have |= kinds[j] == k;
		if (!have)
			kinds[nk++] = k;
	}
	if (ignored) {
		for (unsigned j = 0; j < nk; j++)
			r->values_ignored[kinds[j]]++;
		return;
	}
	unsigned long idx = r->total++;
	if (r->per_kind[GB_D_VALUE] < FIRST_PCS)
		r->first_pc[GB_D_VALUE][r->per_kind[GB_D_VALUE]] = pc;
	r->per_kind[GB_D_VALUE]++;
	count_vpc(r, pc, &vd);
	if ((long)idx >= r->o.max_diffs)
		return;
	char sym[256], dis[160], mnem[32], ta[256], tb[256];
	treport_describe(r, pc, sym, sizeof(sym));
	gb_tbin__disasm(r->o.bin, pc, dis, sizeof(dis), mnem, sizeof(mnem));
	if (r->doc) {
		cJSON *j = cJSON_CreateObject();
		char hex[24];
		snprintf(hex, sizeof(hex), "0x%" PRIx64, pc);
		cJSON_AddStringToObject(j, "kind", treport_kind_name(GB_D_VALUE));
		cJSON_AddNumberToObject(j, "record", (double)(x->recno + 1));
		cJSON_AddNumberToObject(j, "a_line", (double)x->r[0].lineno);
		cJSON_AddNumberToObject(j, "b_line", (double)y->r[0].lineno);
		cJSON_AddStringToObject(j, "pc", hex);
		cJSON_AddStringToObject(j, "symbol", sym);
		cJSON_AddStringToObject(j, "insn", dis);
		cJSON_AddNumberToObject(j, "vt_a", (double)x->r[0].l.vt);
		cJSON_AddNumberToObject(j, "vt_b", (double)y->r[0].l.vt);
		cJSON *vals = cJSON_AddArrayToObject(j, "values");
		for (unsigned k = 0; k < vd.n && k < GB_VDIFF_SHOWN; k++) {
			cJSON *v = cJSON_CreateObject();
			gb_values_typed(vd.d[k].what, vd.d[k].a, vd.d[k].size, mnem, ta, sizeof(ta));
			gb_values_typed(vd.d[k].what, vd.d[k].b, vd.d[k].size, mnem, tb, sizeof(tb));
			cJSON_AddStringToObject(v, "what", vd.d[k].what);
			cJSON_AddStringToObject(v, "a", vd.d[k].a);
			cJSON_AddStringToObject(v, "b", vd.d[k].b);
			cJSON_AddStringToObject(v, "a_as", ta);
			cJSON_AddStringToObject(v, "b_as", tb);
			if (vd.d[k].kind)
				cJSON_AddStringToObject(v, "kind", gb_vkind_info(vd.d[k].kind)->name);
			cJSON_AddItemToArray(vals, v);
		}
		if (nk) {
			cJSON *h = cJSON_AddObjectToObject(j, "hint");
			cJSON_AddStringToObject(h, "kind", gb_vkind_info(kinds[0])->name);
			cJSON_AddStringToObject(h, "what", gb_vkind_info(kinds[0])->what);
			cJSON *all = cJSON_AddArrayToObject(h, "kinds");
			for (unsigned k = 0; k < nk; k++)
				cJSON_AddItemToArray(all, cJSON_CreateString(gb_vkind_info(kinds[k])->name));
			cJSON_AddBoolToObject(h, "all", vd.all_kinds);
		}
		cJSON_AddItemToArray(r->divs, j);
		return;
	}
	if (!idx)
		treport_header(r);
	fprintf(r->out, "[%lu] %s at %s (0x%" PRIx64 "), vt %" PRId64 " (A line %ld, B line %ld)\n", idx + 1,
		treport_kind_name(GB_D_VALUE), sym, pc, x->r[0].l.vt, x->r[0].lineno, y->r[0].lineno);
	if (dis[0])
		fprintf(r->out, "    %s\n", dis);
	for (unsigned k = 0; k < vd.n && k < GB_VDIFF_SHOWN; k++) {
		gb_values_typed(vd.d[k].what, vd.d[k].a, vd.d[k].size, mnem, ta, sizeof(ta));
		gb_values_typed(vd.d[k].what, vd.d[k].b, vd.d[k].size, mnem, tb, sizeof(tb));
		fprintf(r->out, "    %-8s - %s%s%s%s\n", vd.d[k].what, vd.d[k].a, ta[0] ? "  (" : "", ta,
			ta[0] ? ")" : "");
		fprintf(r->out, "    %-8s + %s%s%s%s\n", "", vd.d[k].b, tb[0] ? "  (" : "", tb, tb[0] ? ")" : "");
	}
	if (vd.n > GB_VDIFF_SHOWN)
		fprintf(r->out, "    ... %u values differ in all\n", vd.n);
	for (unsigned k = 0; k < nk; k++)
		fprintf(r->out, "    hint: %s: %s%s\n", gb_vkind_info(kinds[k])->name, gb_vkind_info(kinds[k])->what,
			nk == 1 && vd.all_kinds ? "" : " (some of the values)");
	if (nk && vd.all_kinds) {
		fprintf(r->out, "    (--ignore-values ");
		for (unsigned k = 0; k < nk; k++)
			fprintf(r->out, "%s%s", k ? "," : "", gb_vkind_info(kinds[k])->name);
		fprintf(r->out, " leaves this out)\n");
	}
}

static int by_count(const void *a, const void *b)
{
	const struct vpc *x = a, *y = b;
	return x->count != y->count ? (x->count < y->count ? 1 : -1) : (x->pc > y->pc) - (x->pc < y->pc);
}

/* The value divergences per instruction, most first (at most 10 shown). */
void treport_value_table(struct gb_treport *r, cJSON *doc)
{
	if (!r->nvpcs)
		return;
	struct vpc *v = malloc(r->nvpcs * sizeof(*v));
	if (!v)
		return;
	size_t n = 0;
	for (size_t k = 0; k < VPC_SLOTS; k++)
		if (r->vpcs[k].count)
			v[n++] = r->vpcs[k];
	qsort(v, n, sizeof(*v), by_count);
	char sym[256], dis[160];
	cJSON *arr = doc ? cJSON_AddArrayToObject(doc, "value_divergences_per_insn") : NULL;
	if (!doc)
		fprintf(r->out, "  value divergences per instruction:\n");
	for (size_t k = 0; k < n && k < 10; k++) {
		treport_describe(r, v[k].pc, sym, sizeof(sym));
		gb_tbin__disasm(r->o.bin, v[k].pc, dis, sizeof(dis), NULL, 0);
		if (arr) {
			cJSON *e = cJSON_CreateObject();
			cJSON_AddStringToObject(e, "symbol", sym);
			cJSON_AddStringToObject(e, "insn", dis);
			cJSON_AddNumberToObject(e, "count", (double)v[k].count);
			cJSON_AddStringToObject(e, "what", v[k].regs);
			cJSON_AddItemToArray(arr, e);
		} else {
			fprintf(r->out, "    %-28s %8" PRIu64 "  %s  (%s)\n", sym, v[k].count, dis, v[k].regs);
		}
	}
	if (n > 10 && !doc)
		fprintf(r->out, "    ... %zu instructions in all\n", n);
	free(v);
}

void treport_ignored_line(struct gb_treport *r, cJSON *doc)
{
	cJSON *ig = doc ? cJSON_AddObjectToObject(doc, "values_ignored") : NULL;
	bool any = false;
	for (int k = 1; k < GB_VK_N; k++) {
		if (!r->values_ignored[k])
			continue;
		if (ig) {
			cJSON_AddNumberToObject(ig, gb_vkind_info(k)->name, (double)r->values_ignored[k]);
			continue;
		}
		fprintf(r->out, "%s%s %lu", any ? ", " : "  value differences left out (--ignore-values): ",
			gb_vkind_info(k)->name, r->values_ignored[k]);
		any = true;
	}
	if (any)
		fprintf(r->out, "\n");
}

