/* --normalise, one instruction group at a time (norm.h). */
#include "tdiff/norm.h"

#include <stdlib.h>
#include <string.h>

#include "tdiff/group.h"

static const struct {
	const char *name, *what;
	unsigned on;   /* 1 << GB_NORM_QEMU | 1 << GB_NORM_LACKEY */
} rules[GB_RULE_N] = {
	[GB_RULE_SPLIT] = { "split", "QEMU's 8-byte pieces of a wider access merged back", 1u << GB_NORM_QEMU },
	[GB_RULE_SMC] = { "smc-store", "QEMU's second log of a store that modifies code dropped",
			  1u << GB_NORM_QEMU },
	[GB_RULE_REP_EXEC] = { "rep-exec", "QEMU's and lackey's extra exec at the end of a REP loop dropped",
			       1u << GB_NORM_QEMU | 1u << GB_NORM_LACKEY },
	[GB_RULE_LOCK_READ] = { "lock-read", "lackey's second read of a locked RMW / xchg dropped",
				1u << GB_NORM_LACKEY },
	[GB_RULE_CMPS] = { "cmps-order", "CMPS's two reads put in address order (records moved)",
			   1u << GB_NORM_QEMU | 1u << GB_NORM_LACKEY },
	[GB_RULE_SUMMARY] = { "summary", "summary lines left out", 1u << GB_NORM_QEMU | 1u << GB_NORM_LACKEY },
};

bool gb_norm_rule_on(enum gb_norm norm, enum gb_norm_rule rule)
{
	return norm != GB_NORM_NONE && (rules[rule].on >> norm & 1);
}

const char *gb_norm_rule_name(enum gb_norm_rule rule) { return rules[rule].name; }
const char *gb_norm_rule_what(enum gb_norm_rule rule) { return rules[rule].what; }

const char *gb_norm_name(enum gb_norm norm)
{
	return norm == GB_NORM_QEMU ? "qemu" : norm == GB_NORM_LACKEY ? "lackey" : "none";
}

static void drop(struct gb_tgroup *g, size_t i)
{
	gb_trec_release(&g->r[i]);
	memmove(&g->r[i], &g->r[i + 1], (g->n - i - 1) * sizeof(g->r[0]));
	g->n--;
}

static bool same_insn(const struct gb_tline *x, const struct gb_tline *y)
{
	return x->vcpu == y->vcpu && x->pc == y->pc && x->vt == y->vt;
}

/* --values: piece x's value after piece p's (little-endian: x's digits on
 * top, p's padded to its width); none when either has none. */
static void merge_val(struct gb_trec *p, const struct gb_trec *x)
{
	char *m = NULL;
	if (p->val && x->val && !strncmp(p->val, "0x", 2) && !strncmp(x->val, "0x", 2)) {
		size_t pw = 2 * (size_t)p->l.size, pn = strlen(p->val + 2), xn = strlen(x->val + 2);
		bool xzero = !strcmp(x->val + 2, "0");
		if (pn <= pw && (m = malloc(2 + (xzero ? 0 : xn) + pw + 1))) {
			char *q = m;
			memcpy(q, "0x", 2);
			q += 2;
			if (!xzero) {
				memcpy(q, x->val + 2, xn);
				q += xn;
				memset(q, '0', pw - pn);
				q += pw - pn;
			}
			memcpy(q, p->val + 2, pn + 1);
		}
	}
	free(p->val);
	p->val = m;
}

unsigned gb_norm_apply_rule(enum gb_norm_rule rule, struct gb_tgroup *g)
{
	unsigned changed = 0;
	if (rule == GB_RULE_CMPS) {
		struct gb_trec *r = g->r;
		if (g->n < 3 || r[0].l.type != GB_TL_EXEC || r[1].l.type != GB_TL_READ ||
		    r[2].l.type != GB_TL_READ || !same_insn(&r[0].l, &r[1].l) || !same_insn(&r[0].l, &r[2].l) ||
		    r[1].l.size != r[2].l.size)
			return 0;
		int64_t s = r[1].l.size;
		if (s != 1 && s != 2 && s != 4 && s != 8)
			return 0;
		for (size_t i = 3; i < g->n; i++)
			if (gb_tline_is_access(&r[i].l))
				return 0;
		if (r[1].l.addr > r[2].l.addr) {
			struct gb_trec t = r[1];
			r[1] = r[2];
			r[2] = t;
			changed = 2;
		}
		return changed;
	}
	for (size_t i = 1; i < g->n; i++) {
		struct gb_tline *p = &g->r[i - 1].l, *x = &g->r[i].l;
		if (!gb_tline_is_access(p) || p->type != x->type || !same_insn(p, x))
			continue;
		if (rule == GB_RULE_SPLIT && x->size >= 1 && x->size <= 16 && p->size >= 8 && p->size % 8 == 0 &&
		    p->addr + (uint64_t)p->size == x->addr) {
			merge_val(&g->r[i - 1], &g->r[i]);
			p->size += x->size;   /* 8-byte pieces (QEMU 10: 16), the last one shorter (x87's 10 bytes: 8 + 2) */
		} else if (((rule == GB_RULE_SMC && x->type == GB_TL_WRITE) ||
			    (rule == GB_RULE_LOCK_READ && x->type == GB_TL_READ)) &&
			   p->addr == x->addr && p->size == x->size) {
		} else {
			continue;
		}
		drop(g, i--);
		changed++;
	}
	return changed;
}

static bool is_exec_group(const struct gb_tgroup *g)
{
	return g->n && g->r[0].l.type == GB_TL_EXEC;
}

bool gb_norm_group(enum gb_norm norm, struct gb_tgroup *g, struct gb_norm_state *st,
		   struct gb_norm_counts *c)
{
	if (norm == GB_NORM_NONE || !g->n)
		return true;
	if (g->r[0].l.type == GB_TL_SUMMARY) {
		if (c)
			c->n[GB_RULE_SUMMARY]++;
		return false;
	}
	/* Merging first, then the duplicates, as the one loop of the rules
	 * before them did: a split store that is also an SMC store merges. */
	for (int rule = GB_RULE_SPLIT; rule <= GB_RULE_LOCK_READ; rule++) {
		if (rule == GB_RULE_REP_EXEC || !gb_norm_rule_on(norm, rule))
			continue;
		unsigned k = gb_norm_apply_rule(rule, g);
		if (c)
			c->n[rule] += k;
	}
	if (st && is_exec_group(g)) {
		bool acc = gb_tgroup_accesses(g) > 0;
		if (gb_norm_rule_on(norm, GB_RULE_REP_EXEC) && !acc && st->prev_exec_with_access &&
		    st->prev_pc == g->r[0].l.pc && st->prev_vcpu == g->r[0].l.vcpu) {
			st->prev_exec_with_access = false;
			if (c)
				c->n[GB_RULE_REP_EXEC]++;
			return false;
		}
		st->prev_exec_with_access = acc;
		st->prev_pc = g->r[0].l.pc;
		st->prev_vcpu = g->r[0].l.vcpu;
	} else if (st && gb_tgroup_accesses(g)) {
		st->prev_exec_with_access = true;
	}
	unsigned k = gb_norm_apply_rule(GB_RULE_CMPS, g);
	if (c)
		c->n[GB_RULE_CMPS] += k;
	if (st) {
		if (is_exec_group(g))
			st->vt++;
		for (size_t i = 0; i < g->n && st->vt >= 0; i++)
			if (g->r[i].l.type != GB_TL_OTHER)
				g->r[i].l.vt = st->vt;
	}
	return true;
}
