/* Counting twins (docs/trace.md "Counting after the budget"): the map of
 * the twins made: pc -> twin (with its TW_F_* flags), the pcs the next
 * pass wants, and the acquire sites' twin words (lock.c's twin_check makes
 * them, the pass fills them).  Bookkeeping only, no code emitted, so it
 * stands below all that uses it: the lookup table (ibl.c puts a block's
 * published twin in its column), the lock's sites (lock.c) and the twins'
 * own files. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "jit/internal.h"
#include "jit/twin.h"

/* --- the pc -> twin map (open addressing, key 0 empty) --- */

static size_t tslot(const struct gb_jit *j, uint64_t pc)
{
	size_t h = (size_t)((pc * 0x9e3779b97f4a7c15ull) >> 20) & (j->tcap - 1);
	while (j->tk[h] && j->tk[h] != pc)
		h = (h + 1) & (j->tcap - 1);
	return h;
}

uint64_t ns_twin_of(const struct gb_jit *j, uint64_t pc, uint8_t *f)
{
	if (!j->tcap)
		return 0;
	size_t h = tslot(j, pc);
	if (j->tk[h] != pc)
		return 0;
	if (f)
		*f = j->tf[h];
	return j->tv[h];
}

int ns_twin_put(struct gb_jit *j, uint64_t pc, uint64_t addr, uint8_t f)
{
	if ((j->tn + 1) * 2 > j->tcap) {
		size_t oc = j->tcap, nc = oc ? oc * 2 : 1024;
		uint64_t *ok = j->tk, *ov = j->tv;
		uint8_t *of = j->tf;
		uint64_t *nk = calloc(nc, sizeof(*nk)), *nv = calloc(nc, sizeof(*nv));
		uint8_t *nf = calloc(nc, 1);
		if (!nk || !nv || !nf) {
			free(nk);
			free(nv);
			free(nf);
			return -ENOMEM;
		}
		j->tk = nk;
		j->tv = nv;
		j->tf = nf;
		j->tcap = nc;
		for (size_t k = 0; k < oc; k++)
			if (ok[k]) {
				size_t h = tslot(j, ok[k]);
				j->tk[h] = ok[k];
				j->tv[h] = ov[k];
				j->tf[h] = of[k];
			}
		free(ok);
		free(ov);
		free(of);
	}
	size_t h = tslot(j, pc);
	if (!j->tk[h])
		j->tn++;
	j->tk[h] = pc;
	j->tv[h] = addr;
	j->tf[h] = f;
	return 0;
}

void ns_twin_reset(struct gb_jit *j)
{
	if (j->tk)
		memset(j->tk, 0, j->tcap * sizeof(*j->tk));
	j->tn = j->ntl = j->nts = j->nts_seen = j->ntwant = 0;
}

uint64_t ns_twin_pub(const struct gb_jit *j, uint64_t pc)
{
	uint8_t f = 0;
	uint64_t t = ns_twin_of(j, pc, &f);
	return t && !(f & TW_F_NEW) ? t : 0;
}

uint64_t gb_jit__twin(const struct gb_jit *j, uint64_t pc)
{
	uint8_t f = 0;
	uint64_t t = ns_twin_of(j, pc, &f);
	return t && f == TW_F_TWIN ? t : 0;
}

void ns_twin_slot(struct gb_jit *j, uint64_t pc, uint32_t off)
{
	if (GB_GROW(&j->ts, &j->tscap, j->nts + 1)) {
		j->em.err = -ENOMEM;
		return;
	}
	j->ts[j->nts++] = (struct twslot){ pc, off };
}

int ns_twin_want_add(struct gb_jit *j, uint64_t pc)
{
	if (GB_GROW(&j->twant, &j->twantcap, j->ntwant + 1))
		return -ENOMEM;
	j->twant[j->ntwant++] = pc;
	return 0;
}
