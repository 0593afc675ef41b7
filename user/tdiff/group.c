/* Instruction groups, the records of one instruction (group.h). */
#include "tdiff/group.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/log.h"

int gb_tgroup_push(struct gb_tgroup *g, const struct gb_trec *x)
{
	if (GB_GROW(&g->r, &g->cap, g->n + 1))
		return -ENOMEM;
	g->r[g->n++] = *x;
	return 0;
}

void gb_trec_release(struct gb_trec *x)
{
	free(x->raw);
	free(x->val);
	free(x->regs);
	x->raw = x->val = x->regs = NULL;
}

int gb_trec_dup(struct gb_trec *x)
{
	char *raw = x->raw ? strdup(x->raw) : NULL, *val = x->val ? strdup(x->val) : NULL;
	char *regs = x->regs ? strdup(x->regs) : NULL;
	if ((x->raw && !raw) || (x->val && !val) || (x->regs && !regs)) {
		free(raw);
		free(val);
		free(regs);
		x->raw = x->val = x->regs = NULL;
		return -ENOMEM;
	}
	x->raw = raw;
	x->val = val;
	x->regs = regs;
	return 0;
}

void gb_tgroup_clear(struct gb_tgroup *g)
{
	for (size_t i = 0; i < g->n; i++)
		gb_trec_release(&g->r[i]);
	g->n = 0;
}

void gb_tgroup_free(struct gb_tgroup *g)
{
	gb_tgroup_clear(g);
	free(g->r);
	g->r = NULL;
	g->cap = 0;
}

int gb_tgroup_copy(struct gb_tgroup *dst, const struct gb_tgroup *src)
{
	gb_tgroup_clear(dst);
	dst->recno = src->recno;
	for (size_t i = 0; i < src->n; i++) {
		struct gb_trec x = src->r[i];
		if (gb_trec_dup(&x))
			return gb_fail(-ENOMEM, "out of memory");
		if (gb_tgroup_push(dst, &x)) {
			gb_trec_release(&x);
			return -ENOMEM;
		}
	}
	return 0;
}

bool gb_tgroup_is_insn(const struct gb_tgroup *g)
{
	return g->n && (g->r[0].l.type == GB_TL_EXEC || gb_tline_is_access(&g->r[0].l) ||
			g->r[0].l.type == GB_TL_FAULT);
}

size_t gb_tgroup_accesses(const struct gb_tgroup *g)
{
	size_t k = 0;
	for (size_t i = 0; i < g->n; i++)
		k += gb_tline_is_access(&g->r[i].l);
	return k;
}
