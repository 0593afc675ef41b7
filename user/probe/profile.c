/* Sample aggregation (--report, --folded): profile.h. */
#include "probe/profile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sym/syms.h"

/* An address seen in a sample or a stack, named once. */
struct addr_ent {
	uint64_t addr;
	uint64_t count;          /* samples with this pc */
	char *func;              /* "hot", "libc.so.6+0x1234", "[unknown]" */
	uint64_t off;
	int used;
};

/* A string with a count (functions, folded stacks). */
struct str_ent {
	char *key;
	uint64_t count;
};

struct str_tab {
	struct str_ent *v;
	size_t n, cap;           /* open addressing, cap a power of 2 */
};

struct gb_profile {
	pid_t pid;
	struct gb_syms *syms;
	double syms_at;          /* when syms was read (monotonic seconds) */
	struct addr_ent *addrs;
	size_t naddrs, cap;
	struct str_tab stacks;
	uint64_t total;
	char *buf;               /* folded key being built */
	size_t buflen;
};

static uint64_t hash64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return h;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int str_add(struct str_tab *t, const char *key, uint64_t n)
{
	if (2 * (t->n + 1) > t->cap) {
		size_t ncap = t->cap ? 2 * t->cap : 256;
		struct str_ent *nv = calloc(ncap, sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		for (size_t i = 0; i < t->cap; i++) {
			if (!t->v[i].key)
				continue;
			size_t j = hash_str(t->v[i].key) & (ncap - 1);
			while (nv[j].key)
				j = (j + 1) & (ncap - 1);
			nv[j] = t->v[i];
		}
		free(t->v);
		t->v = nv;
		t->cap = ncap;
	}
	size_t j = hash_str(key) & (t->cap - 1);
	while (t->v[j].key && strcmp(t->v[j].key, key))
		j = (j + 1) & (t->cap - 1);
	if (!t->v[j].key) {
		t->v[j].key = strdup(key);
		if (!t->v[j].key)
			return -ENOMEM;
		t->n++;
	}
	t->v[j].count += n;
	return 0;
}

static void str_free(struct str_tab *t)
{
	for (size_t i = 0; i < t->cap; i++)
		free(t->v[i].key);
	free(t->v);
	memset(t, 0, sizeof(*t));
}

static int cmp_str_desc(const void *a, const void *b)
{
	const struct str_ent *x = a, *y = b;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return strcmp(x->key, y->key);
}

/* Dense copy of a table's entries, sorted by count (caller frees). */
static struct str_ent *str_sorted(const struct str_tab *t)
{
	struct str_ent *v = malloc((t->n + 1) * sizeof(*v));
	size_t k = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < t->cap; i++)
		if (t->v[i].key)
			v[k++] = t->v[i];
	qsort(v, k, sizeof(*v), cmp_str_desc);
	return v;
}

struct gb_profile *gb_profile__new(pid_t pid)
{
	struct gb_profile *p = calloc(1, sizeof(*p));
	if (p)
		p->pid = pid;
	return p;
}

static void name_addr(struct gb_profile *p, struct addr_ent *e)
{
	char name[512];
	uint64_t off = 0;
	int err = -ENOENT;

	/* The process's symbols, read on first use and again (at most once
	 * a second) when an address is not in any mapping read so far. */
	for (int tries = 0; tries < 2; tries++) {
		if (!p->syms) {
			p->syms = gb_syms__new(p->pid);
			p->syms_at = now_s();
		}
		name[0] = 0;
		if (p->syms)
			err = gb_syms__lookup(p->syms, e->addr, name, sizeof(name), &off);
		if (!name[0] || !strcmp(name, "??"))
			name[0] = 0;   /* not in any mapping read */
		if (!err || name[0] || now_s() - p->syms_at < 1.0)
			break;
		gb_syms__free(p->syms);
		p->syms = NULL;
	}
	if (!err) {
		e->func = strdup(name);
		e->off = off;
	} else {
		e->func = strdup(name[0] ? name : "[unknown]");
		e->off = 0;
	}
}

static struct addr_ent *addr_get(struct gb_profile *p, uint64_t addr)
{
	if (2 * (p->naddrs + 1) > p->cap) {
		size_t ncap = p->cap ? 2 * p->cap : 1024;
		struct addr_ent *nv = calloc(ncap, sizeof(*nv));
		if (!nv)
			return NULL;
		for (size_t i = 0; i < p->cap; i++) {
			if (!p->addrs[i].used)
				continue;
			size_t j = hash64(p->addrs[i].addr) & (ncap - 1);
			while (nv[j].used)
				j = (j + 1) & (ncap - 1);
			nv[j] = p->addrs[i];
		}
		free(p->addrs);
		p->addrs = nv;
		p->cap = ncap;
	}
	size_t j = hash64(addr) & (p->cap - 1);
	while (p->addrs[j].used && p->addrs[j].addr != addr)
		j = (j + 1) & (p->cap - 1);
	struct addr_ent *e = &p->addrs[j];
	if (!e->used) {
		e->used = 1;
		e->addr = addr;
		p->naddrs++;
		name_addr(p, e);
		if (!e->func)
			return NULL;
	}
	return e;
}

static int fold(struct gb_profile *p, const struct gb_sample *s)
{
	size_t len = 0;

	/* Outermost first.  Frames above the first are return addresses:
	 * name the call (addr - 1), not the instruction after it. */
	for (uint32_t i = s->nframes; i-- > 0;) {
		uint64_t a = s->stack[i];
		if (!a)
			continue;
		struct addr_ent *e = addr_get(p, i ? a - 1 : a);
		if (!e)
			return -ENOMEM;
		size_t need = len + strlen(e->func) + 2;
		if (need > p->buflen) {
			char *nb = realloc(p->buf, need * 2);
			if (!nb)
				return -ENOMEM;
			p->buf = nb;
			p->buflen = need * 2;
		}
		len += (size_t)sprintf(p->buf + len, "%s%s", len ? ";" : "", e->func);
	}
	if (!len)
		return str_add(&p->stacks, "[no user stack]", 1);
	return str_add(&p->stacks, p->buf, 1);
}

int gb_profile__add(struct gb_profile *p, const struct gb_sample *s)
{
	struct addr_ent *e = addr_get(p, s->pc);

	if (!e)
		return -ENOMEM;
	e->count++;
	p->total++;
	return s->stack ? fold(p, s) : 0;
}

static int cmp_addr_desc(const void *a, const void *b)
{
	const struct addr_ent *x = *(struct addr_ent *const *)a, *y = *(struct addr_ent *const *)b;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

void gb_profile__report(struct gb_profile *p, FILE *f, size_t top, const char *header)
{
	struct addr_ent **v = malloc((p->naddrs + 1) * sizeof(*v));
	struct str_tab funcs = { 0 };
	struct str_ent *fv = NULL;
	size_t n = 0;

	if (!top)
		top = 20;
	if (!v)
		return;
	for (size_t i = 0; i < p->cap; i++)
		if (p->addrs[i].used && p->addrs[i].count) {
			v[n++] = &p->addrs[i];
			str_add(&funcs, p->addrs[i].func, p->addrs[i].count);
		}
	qsort(v, n, sizeof(*v), cmp_addr_desc);

	fprintf(f, "# %s\n", header);
	fprintf(f, "# top pcs\n%10s %7s  %-18s %s\n", "samples", "%", "pc", "symbol");
	for (size_t i = 0; i < n && i < top; i++)
		fprintf(f, "%10" PRIu64 " %7.2f  0x%-16" PRIx64 " %s+0x%" PRIx64 "\n", v[i]->count,
			100.0 * (double)v[i]->count / (double)p->total, v[i]->addr, v[i]->func, v[i]->off);
	fprintf(f, "# top functions\n%10s %7s  %s\n", "samples", "%", "function");
	fv = str_sorted(&funcs);
	for (size_t i = 0; fv && i < funcs.n && i < top; i++)
		fprintf(f, "%10" PRIu64 " %7.2f  %s\n", fv[i].count,
			100.0 * (double)fv[i].count / (double)p->total, fv[i].key);
	free(fv);
	str_free(&funcs);
	free(v);
}

void gb_profile__folded(struct gb_profile *p, FILE *f)
{
	struct str_ent *v = str_sorted(&p->stacks);

	for (size_t i = 0; v && i < p->stacks.n; i++)
		fprintf(f, "%s %" PRIu64 "\n", v[i].key, v[i].count);
	free(v);
}

void gb_profile__free(struct gb_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->cap; i++)
		free(p->addrs[i].func);
	free(p->addrs);
	str_free(&p->stacks);
	gb_syms__free(p->syms);
	free(p->buf);
	free(p);
}
