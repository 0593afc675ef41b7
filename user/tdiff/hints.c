/* Divergences shaped like emulator quirks (hints.h). */
#include "tdiff/hints.h"

#include <string.h>

#include "tdiff/norm.h"

static const struct gb_quirk_info quirks[GB_QUIRK_N] = {
	[GB_QUIRK_SPLIT] = { "qemu-split", "QEMU splits accesses wider than 8 bytes into 8-byte pieces", "qemu" },
	[GB_QUIRK_SMC] = { "qemu-smc-store", "QEMU logs a store that modifies code twice", "qemu" },
	[GB_QUIRK_REP_EXEC] = { "rep-exec",
				"QEMU and lackey report an extra exec without accesses when a REP loop ends on RCX=0",
				"qemu or lackey" },
	[GB_QUIRK_LOCK_READ] = { "lackey-lock-read",
				 "lackey reads twice on a locked read-modify-write and on xchg", "lackey" },
	[GB_QUIRK_CMPS] = { "cmps-order",
			    "QEMU and lackey list CMPS's reads as ES:(RDI) then DS:(RSI), hardware the other way",
			    "qemu or lackey" },
	[GB_QUIRK_BITTEST] = { "lackey-bittest",
			       "lackey reports a bit-test's memory operand as the 1 byte holding the bit", NULL },
	[GB_QUIRK_GATHER_LANE] = { "lackey-gather-lane",
				   "lackey reads 4 bytes at its stack pointer for each masked-off lane of an AVX2 "
				   "gather", NULL },
	[GB_QUIRK_MASKMOV] = { "qemu-maskmov", "QEMU loads the masked-off bytes of vmaskmov/vpmaskmov loads",
			       NULL },
	[GB_QUIRK_CPU_IFUNC] = { "cpu-ifunc",
				 "glibc's ifunc picked another implementation for each side's CPU (QEMU's CPU "
				 "model lacks features of the host, such as AVX-512)", NULL,
				 "trace a range that calls no string function, or give both sides the same choice "
				 "(docs/qemu.md, \"What else differs under qemu-x86_64 7.2\")" },
};

const struct gb_quirk_info *gb_quirk_info(enum gb_quirk q)
{
	return q > GB_QUIRK_NONE && q < GB_QUIRK_N ? &quirks[q] : NULL;
}

/* Does the in-group rule, applied to copies of both groups, make them
 * equal? */
static bool rule_undoes(const struct gb_hint_in *in, enum gb_norm_rule rule)
{
	struct gb_tgroup x = { 0 }, y = { 0 };
	bool eq = false;
	if (!gb_tgroup_copy(&x, in->a[0]) && !gb_tgroup_copy(&y, in->b[0])) {
		unsigned k = gb_norm_apply_rule(rule, &x) + gb_norm_apply_rule(rule, &y);
		eq = k && gb_group_equal(&x, in->ra, &y, in->rb, in->o);
	}
	gb_tgroup_free(&x);
	gb_tgroup_free(&y);
	return eq;
}

static bool mnem_is(const char *mnem, const char *prefix, const char *sub)
{
	if (!mnem || !*mnem)
		return true;   /* unknown: the shape alone */
	return prefix ? !strncmp(mnem, prefix, strlen(prefix)) : strstr(mnem, sub) != NULL;
}

/* Is small's list big's with extra records that extra() accepts? */
static bool extra_only(const struct gb_hint_in *in, const struct gb_tgroup *big, bool big_is_a,
		       const struct gb_tgroup *small, bool (*extra)(const struct gb_trec *))
{
	size_t j = 0, extras = 0;
	const struct gb_regions *rbig = big_is_a ? in->ra : in->rb, *rsmall = big_is_a ? in->rb : in->ra;
	for (size_t i = 0; i < big->n; i++) {
		if (j < small->n && gb_rec_equal(&big->r[i], rbig, &small->r[j], rsmall, in->o))
			j++;
		else if (extra(&big->r[i]))
			extras++;
		else
			return false;
	}
	return j == small->n && extras;
}

static bool is_read4(const struct gb_trec *x)
{
	return x->l.type == GB_TL_READ && x->l.size == 4;
}

/* Same records but for accesses where one side has 1 byte inside the
 * other's 2, 4 or 8. */
static bool bittest_shape(const struct gb_hint_in *in)
{
	const struct gb_tgroup *a = in->a[0], *b = in->b[0];
	bool seen = false;
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const struct gb_trec *x = &a->r[i], *y = &b->r[i];
		if (gb_rec_equal(x, in->ra, y, in->rb, in->o))
			continue;
		if (!gb_tline_is_access(&x->l) || x->l.type != y->l.type)
			return false;
		const struct gb_trec *one = x->l.size == 1 ? x : y, *unit = x->l.size == 1 ? y : x;
		const struct gb_regions *r1 = one == x ? in->ra : in->rb, *ru = one == x ? in->rb : in->ra;
		if (one->l.size != 1 || (unit->l.size != 2 && unit->l.size != 4 && unit->l.size != 8))
			return false;
		struct gb_raddr p = gb_rebase(in->o->rebase ? r1 : NULL, one->l.addr);
		struct gb_raddr q = gb_rebase(in->o->rebase ? ru : NULL, unit->l.addr);
		if (p.region != q.region || p.off < q.off || p.off >= q.off + unit->l.size)
			return false;
		seen = true;
	}
	return seen;
}

/* Only reads, the bigger side covering every byte the other reads. */
static bool maskmov_shape(const struct gb_hint_in *in)
{
	const struct gb_tgroup *g[2] = { in->a[0], in->b[0] };
	const struct gb_regions *rs[2] = { in->ra, in->rb };
	int64_t bytes[2] = { 0, 0 };
	for (int s = 0; s < 2; s++)
		for (size_t i = 0; i < g[s]->n; i++) {
			const struct gb_tline *l = &g[s]->r[i].l;
			if (l->type == GB_TL_WRITE || l->type == GB_TL_FAULT)
				return false;
			if (l->type == GB_TL_READ)
				bytes[s] += l->size;
		}
	if (bytes[0] == bytes[1] || !bytes[0] || !bytes[1])
		return false;
	int big = bytes[1] > bytes[0], small = !big;
	for (size_t i = 0; i < g[small]->n; i++) {
		const struct gb_tline *l = &g[small]->r[i].l;
		if (l->type != GB_TL_READ)
			continue;
		struct gb_raddr p = gb_rebase(in->o->rebase ? rs[small] : NULL, l->addr);
		bool covered = false;
		for (size_t j = 0; j < g[big]->n && !covered; j++) {
			const struct gb_tline *m = &g[big]->r[j].l;
			struct gb_raddr q = gb_rebase(in->o->rebase ? rs[big] : NULL, m->addr);
			covered = m->type == GB_TL_READ && p.region == q.region && p.off >= q.off &&
				  p.off + l->size <= q.off + m->size;
		}
		if (!covered)
			return false;
	}
	return true;
}

/* The CPU-feature token of a glibc multiarch variant's name: "_TOKEN"
 * followed by the end, '_' or '+'; NULL when there is none. */
static const char *cpu_token(const char *name, size_t *len)
{
	static const char *const tokens[] = { "avx512bw", "avx512vl", "avx512f", "avx512", "evex512", "evex",
					      "avx2", "avx", "sse4_2", "sse4_1", "ssse3", "sse2" };
	size_t n = strcspn(name, "+");
	for (const char *p = name; (p = memchr(p, '_', (size_t)(name + n - p))); p++)
		for (size_t i = 0; i < sizeof(tokens) / sizeof(tokens[0]); i++) {
			size_t k = strlen(tokens[i]);
			if (p + 1 + k <= name + n && !strncmp(p + 1, tokens[i], k) &&
			    (p + 1 + k == name + n || p[1 + k] == '_')) {
				*len = k;
				return p + 1;
			}
		}
	return NULL;
}

bool gb_hint_cpu_variants(const char *a, const char *b)
{
	size_t la, lb;
	const char *ta = a && !strncmp(a, "__", 2) ? cpu_token(a, &la) : NULL;
	const char *tb = b && !strncmp(b, "__", 2) ? cpu_token(b, &lb) : NULL;
	return ta && tb && (la != lb || strncmp(ta, tb, la));
}

static bool rep_extra(const struct gb_tgroup *extra, const struct gb_tgroup *prev)
{
	return extra && prev && extra->n && extra->r[0].l.type == GB_TL_EXEC && !gb_tgroup_accesses(extra) &&
	       prev->n && prev->r[0].l.type == GB_TL_EXEC && gb_tgroup_accesses(prev) &&
	       prev->r[0].l.pc == extra->r[0].l.pc && prev->r[0].l.vcpu == extra->r[0].l.vcpu;
}

enum gb_quirk gb_hint_find(const struct gb_hint_in *in)
{
	/* An access-less exec of the pc whose exec with accesses came just
	 * before, where the other side goes on elsewhere. */
	if (rep_extra(in->b[0], in->prev_b) && (!in->na || in->a[0]->r[0].l.pc != in->b[0]->r[0].l.pc))
		return GB_QUIRK_REP_EXEC;
	if (rep_extra(in->a[0], in->prev_a) && (!in->nb || in->b[0]->r[0].l.pc != in->a[0]->r[0].l.pc))
		return GB_QUIRK_REP_EXEC;
	/* Two pcs: both in ifunc resolvers, or in two CPU variants of one
	 * function. */
	if (in->na && in->nb && in->a[0]->n && in->b[0]->n && gb_tgroup_is_insn(in->a[0]) &&
	    gb_tgroup_is_insn(in->b[0]) && in->a[0]->r[0].l.pc != in->b[0]->r[0].l.pc &&
	    ((in->ifunc_a && in->ifunc_b) || gb_hint_cpu_variants(in->sym_a, in->sym_b)))
		return GB_QUIRK_CPU_IFUNC;
	if (in->na != 1 || in->nb != 1 || !in->a[0]->n || !in->b[0]->n ||
	    !gb_tgroup_is_insn(in->a[0]) || !gb_tgroup_is_insn(in->b[0]))
		return GB_QUIRK_NONE;
	struct gb_raddr pa = gb_rebase(in->o->rebase ? in->ra : NULL, in->a[0]->r[0].l.pc);
	struct gb_raddr pb = gb_rebase(in->o->rebase ? in->rb : NULL, in->b[0]->r[0].l.pc);
	if (pa.region != pb.region || pa.off != pb.off)
		return GB_QUIRK_NONE;
	static const struct {
		enum gb_norm_rule rule;
		enum gb_quirk quirk;
	} by_rule[] = { { GB_RULE_SPLIT, GB_QUIRK_SPLIT }, { GB_RULE_SMC, GB_QUIRK_SMC },
			{ GB_RULE_LOCK_READ, GB_QUIRK_LOCK_READ }, { GB_RULE_CMPS, GB_QUIRK_CMPS } };
	for (size_t i = 0; i < sizeof(by_rule) / sizeof(by_rule[0]); i++)
		if (rule_undoes(in, by_rule[i].rule))
			return by_rule[i].quirk;
	if (mnem_is(in->mnem, "bt", NULL) && bittest_shape(in))
		return GB_QUIRK_BITTEST;
	if (mnem_is(in->mnem, NULL, "gather") &&
	    (extra_only(in, in->a[0], true, in->b[0], is_read4) ||
	     extra_only(in, in->b[0], false, in->a[0], is_read4)))
		return GB_QUIRK_GATHER_LANE;
	if (mnem_is(in->mnem, NULL, "maskmov") && maskmov_shape(in))
		return GB_QUIRK_MASKMOV;
	return GB_QUIRK_NONE;
}
