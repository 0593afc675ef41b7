/* Sample aggregation (--report, --folded, --pprof): profile.h. */
#include "sample/profile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "common/hash.h"
#include "gebpf_events.h"

/* A hash table of byte-string keys with a 64-bit value. */
struct ent {
	void *key;
	size_t len;
	uint64_t hash, val;
};

struct tab {
	struct ent *v;
	size_t n, cap;           /* open addressing, cap a power of 2 */
};

/* The key of a stack: who, then location ids innermost first. */
struct stack_key {
	int32_t pid;
	char comm[GB_COMM_LEN];
	uint32_t n;
	uint64_t ids[];
};

struct loc_key {
	int32_t pid;
	uint32_t kernel;         /* 1 kernel, 2 return address, 4 Python */
	uint64_t addr;           /* Python: the gb_pyfunc id */
	int64_t line;            /* Python: the line */
};

struct gb_profile {
	struct gb_unwinder *u;
	const struct gb_kallsyms *k;
	bool per_process;
	struct tab loc_index;    /* loc_key -> id */
	struct gb_profile_loc *locs;
	size_t nlocs, loccap;
	struct tab stacks;       /* stack_key -> count */
	uint64_t total;
	struct stack_key *key;   /* being built */
	size_t keycap;           /* ids it holds */
};

/* The value slot of key, added (0) if absent.  NULL on ENOMEM. */
static uint64_t *tab_get(struct tab *t, const void *key, size_t len)
{
	uint64_t h = gb_fnv1a(key, len, GB_FNV1A_INIT);

	if (2 * (t->n + 1) > t->cap) {
		size_t ncap = t->cap ? 2 * t->cap : 1024;
		struct ent *nv = calloc(ncap, sizeof(*nv));
		if (!nv)
			return NULL;
		for (size_t i = 0; i < t->cap; i++) {
			if (!t->v[i].key)
				continue;
			size_t j = t->v[i].hash & (ncap - 1);
			while (nv[j].key)
				j = (j + 1) & (ncap - 1);
			nv[j] = t->v[i];
		}
		free(t->v);
		t->v = nv;
		t->cap = ncap;
	}
	size_t j = h & (t->cap - 1);
	while (t->v[j].key && (t->v[j].hash != h || t->v[j].len != len ||
			       memcmp(t->v[j].key, key, len)))
		j = (j + 1) & (t->cap - 1);
	if (!t->v[j].key) {
		t->v[j].key = malloc(len);
		if (!t->v[j].key)
			return NULL;
		memcpy(t->v[j].key, key, len);
		t->v[j].len = len;
		t->v[j].hash = h;
		t->n++;
	}
	return &t->v[j].val;
}

static void tab_free(struct tab *t)
{
	for (size_t i = 0; i < t->cap; i++)
		free(t->v[i].key);
	free(t->v);
	memset(t, 0, sizeof(*t));
}

static int cmp_ent_desc(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;
	if (x->val != y->val)
		return x->val < y->val ? 1 : -1;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return memcmp(x->key, y->key, x->len);
}

/* Dense copy of a table's entries, largest value first (caller frees). */
static struct ent *tab_sorted(const struct tab *t)
{
	struct ent *v = malloc((t->n + 1) * sizeof(*v));
	size_t k = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < t->cap; i++)
		if (t->v[i].key)
			v[k++] = t->v[i];
	qsort(v, k, sizeof(*v), cmp_ent_desc);
	return v;
}

struct gb_profile *gb_profile__new(struct gb_unwinder *u, const struct gb_kallsyms *k,
				   bool per_process)
{
	struct gb_profile *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->u = u;
	p->k = k;
	p->per_process = per_process;
	return p;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void name_loc(struct gb_profile *p, struct gb_profile_loc *l)
{
	if (l->kernel) {
		uint64_t off = 0;
		const char *n = gb_kallsyms__lookup(p->k, l->ret ? l->addr - 1 : l->addr, &off);
		l->func = dup_or_null(n);
		l->func_off = off + (l->ret ? 1 : 0);
		l->module = strdup("[kernel.kallsyms]");
		return;
	}
	struct gb_frame_info fi;
	if (!p->u)
		return;
	gb_unwinder__identify(p->u, l->pid, l->addr, l->ret, &fi);
	l->func = dup_or_null(fi.func);
	l->sym = dup_or_null(fi.sym);
	l->func_off = fi.func_off;
	l->module = dup_or_null(fi.module);
	l->build_id = dup_or_null(fi.build_id);
	l->mod_start = fi.mod_start;
	l->mod_end = fi.mod_end;
	l->source_due = fi.module != NULL;
}

void gb_profile__sources(struct gb_profile *p)
{
	for (size_t i = 0; p && p->u && i < p->nlocs; i++) {
		struct gb_profile_loc *l = &p->locs[i];
		if (!l->source_due)
			continue;
		l->source_due = false;
		const char *file = gb_unwinder__source(p->u, l->pid, l->addr, l->ret, &l->line);
		l->file = file ? strdup(file) : NULL;
	}
}

/* The location of key: *id is its id (0 on ENOMEM).  The first time, the
 * location is added zeroed and returned for its caller to fill in; NULL
 * when it was there already (or on ENOMEM). */
static struct gb_profile_loc *loc_add(struct gb_profile *p, const struct loc_key *key,
				      uint64_t *id)
{
	uint64_t *slot = tab_get(&p->loc_index, key, sizeof(*key));

	*id = 0;
	if (!slot)
		return NULL;
	if (*slot) {
		*id = *slot;
		return NULL;
	}
	if (GB_GROW(&p->locs, &p->loccap, p->nlocs + 1))
		return NULL;
	struct gb_profile_loc *l = &p->locs[p->nlocs];
	memset(l, 0, sizeof(*l));
	*id = *slot = ++p->nlocs;
	return l;
}

/* The id of a location, named the first time.  0 on ENOMEM. */
static uint64_t loc_id(struct gb_profile *p, pid_t pid, uint64_t addr, bool kernel, bool ret)
{
	struct loc_key key = { .pid = kernel ? 0 : pid, .kernel = kernel, .addr = addr };
	uint64_t id;

	/* A return address and a pc at the same address name different
	 * instructions: keep them apart. */
	key.kernel |= ret ? 2 : 0;
	struct gb_profile_loc *l = loc_add(p, &key, &id);
	if (l) {
		l->addr = addr;
		l->pid = key.pid;
		l->kernel = kernel;
		l->ret = ret;
		name_loc(p, l);
	}
	return id;
}

/* The id of a Python location, named the first time.  0 on ENOMEM. */
static uint64_t py_loc_id(struct gb_profile *p, pid_t pid, const struct gb_pyfunc *f, int line)
{
	struct loc_key key = { .pid = pid, .kernel = 4, .addr = f->id, .line = line };
	uint64_t id;
	struct gb_profile_loc *l = loc_add(p, &key, &id);

	if (l) {
		l->pid = pid;
		l->python = true;
		l->func = dup_or_null(f->name);
		l->file = dup_or_null(f->file);
		l->line = line;
		l->start_line = f->first_line;
	}
	return id;
}

/* Room for a key of n ids. */
static int key_room(struct gb_profile *p, size_t n, pid_t pid, const char *comm)
{
	if (n > p->keycap) {
		struct stack_key *nkey = realloc(p->key, sizeof(*nkey) + n * sizeof(uint64_t));
		if (!nkey)
			return -ENOMEM;
		p->key = nkey;
		p->keycap = n;
	}
	memset(p->key, 0, sizeof(*p->key));
	if (p->per_process) {
		p->key->pid = pid;
		snprintf(p->key->comm, sizeof(p->key->comm), "%s", comm ? comm : "");
	}
	return 0;
}

static int count_key(struct gb_profile *p, size_t n)
{
	uint64_t *count;

	p->key->n = (uint32_t)n;
	count = tab_get(&p->stacks, p->key, sizeof(*p->key) + n * sizeof(uint64_t));
	if (!count)
		return -ENOMEM;
	++*count;
	p->total++;
	return 0;
}

static int add_kernel(struct gb_profile *p, pid_t pid, const uint64_t *kframes, size_t nk,
		      size_t *n)
{
	for (size_t i = 0; i < nk; i++) {
		if (!kframes[i])
			continue;
		if (!(p->key->ids[(*n)++] = loc_id(p, pid, kframes[i], true, i > 0)))
			return -ENOMEM;
	}
	return 0;
}

int gb_profile__add(struct gb_profile *p, pid_t pid, const char *comm,
		    const uint64_t *kframes, size_t nk,
		    const uint64_t *uframes, size_t nu, bool upc)
{
	size_t n = 0;

	if (key_room(p, nk + nu, pid, comm) || add_kernel(p, pid, kframes, nk, &n))
		return -ENOMEM;
	for (size_t i = 0; i < nu; i++) {
		if (!uframes[i])
			continue;
		if (!(p->key->ids[n++] = loc_id(p, pid, uframes[i], false, i > 0 || !upc)))
			return -ENOMEM;
	}
	return count_key(p, n);
}

int gb_profile__add_frames(struct gb_profile *p, pid_t pid, const char *comm,
			   const uint64_t *kframes, size_t nk,
			   const struct gb_profile_frame *uframes, size_t nu)
{
	size_t n = 0;

	if (key_room(p, nk + nu, pid, comm) || add_kernel(p, pid, kframes, nk, &n))
		return -ENOMEM;
	for (size_t i = 0; i < nu; i++) {
		const struct gb_profile_frame *f = &uframes[i];
		if (f->py) {
			if (!(p->key->ids[n++] = py_loc_id(p, pid, f->py, f->line)))
				return -ENOMEM;
			continue;
		}
		if (!f->addr)
			continue;
		if (!(p->key->ids[n++] = loc_id(p, pid, f->addr, false, f->ret)))
			return -ENOMEM;
	}
	return count_key(p, n);
}

size_t gb_profile__nlocs(const struct gb_profile *p)
{
	return p->nlocs;
}

const struct gb_profile_loc *gb_profile__loc(const struct gb_profile *p, size_t id)
{
	return id && id <= p->nlocs ? &p->locs[id - 1] : NULL;
}

uint64_t gb_profile__total(const struct gb_profile *p)
{
	return p->total;
}

const char *gb_profile__exe(const struct gb_profile *p, pid_t pid)
{
	return p->u ? gb_unwinder__exe(p->u, pid) : NULL;
}

bool gb_profile__per_process(const struct gb_profile *p)
{
	return p->per_process;
}

int gb_profile__each_stack(const struct gb_profile *p, gb_profile_stack_cb cb, void *ctx)
{
	struct ent *v = tab_sorted(&p->stacks);
	int err = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < p->stacks.n && !err; i++) {
		const struct stack_key *k = v[i].key;
		char comm[GB_COMM_LEN + 1];
		memcpy(comm, k->comm, GB_COMM_LEN);
		comm[GB_COMM_LEN] = 0;
		err = cb(ctx, k->ids, k->n, k->pid, comm, v[i].val);
	}
	free(v);
	return err;
}

/* A name cut by the buffer's end ends at a whole UTF-8 character. */
static void utf8_cut(char *buf, size_t len)
{
	size_t n = strlen(buf), k = n;
	if (!len || n + 1 < len)
		return;
	while (k > 0 && ((unsigned char)buf[k - 1] & 0xc0) == 0x80)
		k--; /* continuation bytes */
	if (k > 0 && ((unsigned char)buf[k - 1] & 0xc0) == 0xc0) {
		unsigned char b = (unsigned char)buf[k - 1];
		size_t want = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
		if (n - (k - 1) < want)
			buf[k - 1] = 0; /* its last character incomplete */
	}
}

void gb_profile__loc_name(const struct gb_profile_loc *l, char *buf, size_t len)
{
	const char *base;

	if (l->func) {
		snprintf(buf, len, "%s%s", l->func, l->kernel ? "_[k]" : "");
	} else if (l->module) {
		base = strrchr(l->module, '/');
		snprintf(buf, len, "%s+0x%" PRIx64, base ? base + 1 : l->module,
			 l->addr - l->mod_start);
	} else {
		snprintf(buf, len, "[unknown]%s", l->kernel ? "_[k]" : "");
	}
	utf8_cut(buf, len);
}

struct folded_ctx {
	const struct gb_profile *p;
	struct tab lines;        /* folded line -> count */
	char *buf;
	size_t len, cap;
};

static int fold_put(struct folded_ctx *c, const char *s)
{
	size_t n = strlen(s);
	if (GB_GROW(&c->buf, &c->cap, c->len + n + 2))
		return -ENOMEM;
	if (c->len)
		c->buf[c->len++] = ';';
	memcpy(c->buf + c->len, s, n + 1);
	c->len += n;
	return 0;
}

static int fold_one(void *ctx, const uint64_t *ids, size_t n, pid_t pid, const char *comm,
		    uint64_t count)
{
	struct folded_ctx *c = ctx;
	char name[512];
	uint64_t *v;
	int err = 0;

	c->len = 0;
	if (c->p->per_process) {
		snprintf(name, sizeof(name), "%s-%d", comm, pid);
		err = fold_put(c, name);
	}
	for (size_t i = n; i-- > 0 && !err;) {
		gb_profile__loc_name(gb_profile__loc(c->p, ids[i]), name, sizeof(name));
		err = fold_put(c, name);
	}
	if (!n && !err)
		err = fold_put(c, "[no stack]");
	if (err || !(v = tab_get(&c->lines, c->buf, c->len + 1)))
		return -ENOMEM;
	*v += count;
	return 0;
}

int gb_profile__folded(struct gb_profile *p, FILE *f)
{
	struct folded_ctx c = { .p = p };
	struct ent *v = NULL;
	int err = gb_profile__each_stack(p, fold_one, &c);

	if (!err && !(v = tab_sorted(&c.lines)))
		err = -ENOMEM;
	for (size_t i = 0; !err && i < c.lines.n; i++)
		fprintf(f, "%s %" PRIu64 "\n", (const char *)v[i].key, v[i].val);
	free(v);
	free(c.buf);
	tab_free(&c.lines);
	return err;
}

struct report_ctx {
	const struct gb_profile *p;
	struct tab pcs, funcs;
	int err;
};

static int report_one(void *ctx, const uint64_t *ids, size_t n, pid_t pid, const char *comm,
		      uint64_t count)
{
	struct report_ctx *c = ctx;
	char name[512];
	uint64_t *v;

	(void)pid;
	(void)comm;
	if (!n)
		return 0;
	/* The innermost frame: the pc (a kernel frame with --kernel). */
	const struct gb_profile_loc *l = gb_profile__loc(c->p, ids[0]);
	gb_profile__loc_name(l, name, sizeof(name));
	if (!(v = tab_get(&c->funcs, name, strlen(name) + 1)))
		return -ENOMEM;
	*v += count;
	if (!(v = tab_get(&c->pcs, &ids[0], sizeof(ids[0]))))
		return -ENOMEM;
	*v += count;
	return 0;
}

int gb_profile__report(struct gb_profile *p, FILE *f, size_t top, const char *header)
{
	struct report_ctx c = { .p = p };
	struct ent *pv = NULL, *fv = NULL;
	double total = p->total ? (double)p->total : 1;
	int err;

	if (!top)
		top = 20;
	err = gb_profile__each_stack(p, report_one, &c);
	if (!err && (!(pv = tab_sorted(&c.pcs)) || !(fv = tab_sorted(&c.funcs))))
		err = -ENOMEM;
	if (err)
		goto out;
	fprintf(f, "# %s\n", header);
	fprintf(f, "# top pcs\n%10s %7s  %-18s %s\n", "samples", "%", "pc", "symbol");
	for (size_t i = 0; i < c.pcs.n && i < top; i++) {
		const struct gb_profile_loc *l = gb_profile__loc(p, *(uint64_t *)pv[i].key);
		char name[512];
		gb_profile__loc_name(l, name, sizeof(name));
		if (l->python)
			fprintf(f, "%10" PRIu64 " %7.2f  %-18s %s (%s:%d)\n", pv[i].val,
				100.0 * (double)pv[i].val / total, "python", name,
				l->file ? l->file : "?", l->line);
		else if (l->func)
			fprintf(f, "%10" PRIu64 " %7.2f  0x%-16" PRIx64 " %s+0x%" PRIx64 "\n", pv[i].val,
				100.0 * (double)pv[i].val / total, l->addr, name, l->func_off);
		else
			fprintf(f, "%10" PRIu64 " %7.2f  0x%-16" PRIx64 " %s\n", pv[i].val,
				100.0 * (double)pv[i].val / total, l->addr, name);
	}
	fprintf(f, "# top functions\n%10s %7s  %s\n", "samples", "%", "function");
	for (size_t i = 0; i < c.funcs.n && i < top; i++)
		fprintf(f, "%10" PRIu64 " %7.2f  %s\n", fv[i].val, 100.0 * (double)fv[i].val / total,
			(const char *)fv[i].key);
out:
	free(pv);
	free(fv);
	tab_free(&c.pcs);
	tab_free(&c.funcs);
	return err;
}

void gb_profile__free(struct gb_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nlocs; i++) {
		free(p->locs[i].func);
		free(p->locs[i].sym);
		free(p->locs[i].module);
		free(p->locs[i].build_id);
		free(p->locs[i].file);
	}
	free(p->locs);
	tab_free(&p->loc_index);
	tab_free(&p->stacks);
	free(p->key);
	free(p);
}
