/* The map of the translated blocks: pc -> the block's target address
 * (open addressing; key 0 is empty: pc 0 is never code).  jit.c fills it
 * as it translates and empties it at a flush; the twins look a recording
 * block up in it (twin_block.c's to-recording entry), so it stands below
 * both. */
#include <errno.h>
#include <stdlib.h>

#include "jit/internal.h"

static size_t hslot(const struct gb_jit *j, uint64_t pc)
{
	size_t h = (size_t)((pc * 0x9e3779b97f4a7c15ull) >> 20) & (j->hcap - 1);
	while (j->hk[h] && j->hk[h] != pc)
		h = (h + 1) & (j->hcap - 1);
	return h;
}

uint64_t jit_block_of(const struct gb_jit *j, uint64_t pc)
{
	if (!j->hcap)
		return 0;
	size_t h = hslot(j, pc);
	return j->hk[h] == pc ? j->hv[h] : 0;
}

int jit_block_put(struct gb_jit *j, uint64_t pc, uint64_t addr)
{
	if ((j->hn + 1) * 2 > j->hcap) {
		size_t oc = j->hcap, nc = oc ? oc * 2 : 1024;
		uint64_t *ok = j->hk, *ov = j->hv;
		j->hk = calloc(nc, sizeof(*j->hk));
		j->hv = calloc(nc, sizeof(*j->hv));
		if (!j->hk || !j->hv) {
			free(j->hk);
			free(j->hv);
			j->hk = ok;
			j->hv = ov;
			return -ENOMEM;
		}
		j->hcap = nc;
		for (size_t k = 0; k < oc; k++)
			if (ok[k]) {
				size_t h = hslot(j, ok[k]);
				j->hk[h] = ok[k];
				j->hv[h] = ov[k];
			}
		free(ok);
		free(ov);
	}
	size_t h = hslot(j, pc);
	if (!j->hk[h])
		j->hn++;
	j->hk[h] = pc;
	j->hv[h] = addr;
	return 0;
}
