/* Kernel symbols: kallsyms.h. */
#include "unwind/kallsyms.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bound.h"
#include "common/grow.h"

struct ksym {
	uint64_t addr;
	char *name;
};

struct gb_kallsyms {
	struct ksym *v;
	size_t n;
};

static int cmp_ksym(const void *a, const void *b)
{
	uint64_t x = ((const struct ksym *)a)->addr, y = ((const struct ksym *)b)->addr;
	return (x > y) - (x < y);
}

struct gb_kallsyms *gb_kallsyms__new(void)
{
	struct gb_kallsyms *k = calloc(1, sizeof(*k));
	char line[512], name[256], type;
	size_t cap = 0;
	uint64_t addr;
	FILE *f;
	int err = 0;

	if (!k)
		return NULL;
	f = fopen("/proc/kallsyms", "re");
	if (!f) {
		err = errno;
		goto fail;
	}
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%" SCNx64 " %c %255s", &addr, &type, name) != 3)
			continue;
		if (type != 't' && type != 'T' && type != 'w' && type != 'W')
			continue;
		if (GB_GROW(&k->v, &cap, k->n + 1)) {
			err = ENOMEM;
			break;
		}
		k->v[k->n].addr = addr;
		k->v[k->n].name = strdup(name);
		if (!k->v[k->n].name) {
			err = ENOMEM;
			break;
		}
		k->n++;
	}
	fclose(f);
	if (!err && (!k->n || !k->v[k->n - 1].addr))
		err = EPERM;     /* addresses hidden (kptr_restrict) */
	if (err)
		goto fail;
	qsort(k->v, k->n, sizeof(*k->v), cmp_ksym);
	return k;
fail:
	gb_kallsyms__free(k);
	errno = err;
	return NULL;
}

const char *gb_kallsyms__lookup(const struct gb_kallsyms *k, uint64_t addr, uint64_t *off)
{
	/* The last symbol at or below addr. */
	size_t lo = k ? GB_UPPER(k->v, k->n, addr, addr) : 0;
	if (!lo)
		return NULL;
	if (off)
		*off = addr - k->v[lo - 1].addr;
	return k->v[lo - 1].name;
}

void gb_kallsyms__free(struct gb_kallsyms *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->n; i++)
		free(k->v[i].name);
	free(k->v);
	free(k);
}
