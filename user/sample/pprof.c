/* pprof profile.proto writer: pprof.h. */
#include "sample/pprof.h"

#include <errno.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/grow.h"
#include "common/log.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile PbProfile;
typedef Perftools__Profiles__ValueType PbValueType;
typedef Perftools__Profiles__Sample PbSample;
typedef Perftools__Profiles__Label PbLabel;
typedef Perftools__Profiles__Mapping PbMapping;
typedef Perftools__Profiles__Location PbLocation;
typedef Perftools__Profiles__Line PbLine;
typedef Perftools__Profiles__Function PbFunction;

/* A key of one of the interning trees, with the index or id it got. */
struct node {
	const char *a;             /* string; module; function name */
	const char *b;             /* -; -; source file */
	int64_t pid;               /* -; process; - */
	uint64_t start;            /* -; module start; - */
	uint64_t id;
};

struct enc {
	PbProfile prof;
	void *strings, *mappings, *functions;   /* tsearch trees of struct node */
	size_t cap_str, cap_map, cap_fn, cap_sample;
	PbSample *samples;
	PbLabel *labels;           /* two per sample */
	uint64_t period_ns;
	int err;
};

static int cmp_str(const char *x, const char *y)
{
	if (!x || !y)
		return (x != NULL) - (y != NULL);
	return strcmp(x, y);
}

static int cmp_node(const void *p, const void *q)
{
	const struct node *x = p, *y = q;
	int c = cmp_str(x->a, y->a);
	if (c)
		return c;
	if ((c = cmp_str(x->b, y->b)))
		return c;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return (x->start > y->start) - (x->start < y->start);
}


/* Index of s in the string table (added if new). */
static int64_t str(struct enc *e, const char *s)
{
	struct node key = { .a = s ? s : "" }, *n, **slot;

	slot = tfind(&key, &e->strings, cmp_node);
	if (slot)
		return (int64_t)(*slot)->id;
	n = malloc(sizeof(*n));
	if (!n || gb_grow((void **)&e->prof.string_table, &e->cap_str, e->prof.n_string_table + 1,
		       sizeof(char *))) {
		free(n);
		e->err = -ENOMEM;
		return 0;
	}
	*n = key;
	n->a = e->prof.string_table[e->prof.n_string_table] = strdup(key.a);
	n->id = e->prof.n_string_table;
	if (!n->a || !tsearch(n, &e->strings, cmp_node)) {
		free(n);
		e->err = -ENOMEM;
		return 0;
	}
	e->prof.n_string_table++;
	return (int64_t)n->id;
}

/* Intern a mapping or function key: its id, and *fresh if new. */
static uint64_t intern(struct enc *e, void **tree, const struct node *key, size_t count,
		       bool *fresh)
{
	struct node *n, **slot = tfind(key, tree, cmp_node);

	*fresh = false;
	if (slot)
		return (*slot)->id;
	n = malloc(sizeof(*n));
	if (!n || (*n = *key, n->id = count + 1, !tsearch(n, tree, cmp_node))) {
		free(n);
		e->err = -ENOMEM;
		return 0;
	}
	*fresh = true;
	return n->id;
}

/* A zeroed message of size bytes appended to the array *arr of *n (room
 * for *cap).  NULL on ENOMEM (e->err set). */
static void *append(struct enc *e, void ***arr, size_t *n, size_t *cap, size_t size)
{
	void *m = calloc(1, size);

	if (!m || gb_grow((void **)arr, cap, *n + 1, sizeof(void *))) {
		free(m);
		e->err = -ENOMEM;
		return NULL;
	}
	(*arr)[(*n)++] = m;
	return m;
}

static uint64_t mapping_of(struct enc *e, const struct gb_profile_loc *l)
{
	struct node key = { .a = l->module, .pid = l->pid, .start = l->mod_start };
	bool fresh;
	uint64_t id;

	if (!l->module)
		return 0;
	id = intern(e, &e->mappings, &key, e->prof.n_mapping, &fresh);
	if (!fresh || e->err) {
		/* The same mapping named from another read of the maps: keep
		 * what any of them knew. */
		PbMapping *m = id ? e->prof.mapping[id - 1] : NULL;
		if (m && !l->kernel && l->mod_end > m->memory_limit)
			m->memory_limit = l->mod_end;
		if (m && !m->build_id && l->build_id)
			m->build_id = str(e, l->build_id);
		return id;
	}
	PbMapping *m = append(e, (void ***)&e->prof.mapping, &e->prof.n_mapping, &e->cap_map,
			      sizeof(*m));
	if (!m)
		return 0;
	perftools__profiles__mapping__init(m);
	m->id = id;
	m->memory_start = l->mod_start;
	m->memory_limit = l->kernel ? UINT64_MAX : l->mod_end;
	m->filename = str(e, l->module);
	m->build_id = str(e, l->build_id);
	m->has_functions = true;
	m->has_filenames = m->has_line_numbers = l->file != NULL;
	return id;
}

static uint64_t function_of(struct enc *e, const char *name, const struct gb_profile_loc *l)
{
	int64_t n = str(e, name), f = str(e, l->file);
	/* Keys point at the string table's copies, which live as long as e. */
	struct node key = { .a = e->prof.string_table[n], .b = e->prof.string_table[f] };
	bool fresh;
	uint64_t id = e->err ? 0 : intern(e, &e->functions, &key, e->prof.n_function, &fresh);

	if (e->err || !fresh)
		return id;
	PbFunction *fn = append(e, (void ***)&e->prof.function, &e->prof.n_function, &e->cap_fn,
				sizeof(*fn));
	if (!fn)
		return 0;
	perftools__profiles__function__init(fn);
	fn->id = id;
	fn->name = fn->system_name = n;
	if (l->sym && l->func && strcmp(l->sym, l->func))
		fn->system_name = str(e, l->sym); /* (the mangled name, as the ELF has it) */
	fn->filename = f;
	fn->start_line = l->start_line;
	return id;
}

/* pprof shows the first mapping as the profile's "File:": the main
 * executable of the main process first, then the other mappings by
 * process, then address, the kernel last, the same order in every run. */
struct order {
	pid_t main_pid;
	const char *exe;
};

static bool is_main(const struct order *o, const struct gb_profile_loc *l)
{
	return o->exe && l->pid == o->main_pid && !l->kernel && !strcmp(l->module, o->exe);
}

static int cmp_map_order(const void *a, const void *b, void *ctx)
{
	const struct gb_profile_loc *x = *(const struct gb_profile_loc *const *)a;
	const struct gb_profile_loc *y = *(const struct gb_profile_loc *const *)b;
	bool mx = is_main(ctx, x), my = is_main(ctx, y);

	if (mx != my)
		return mx ? -1 : 1;
	if (x->kernel != y->kernel)
		return x->kernel ? 1 : -1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->mod_start != y->mod_start)
		return x->mod_start < y->mod_start ? -1 : 1;
	return strcmp(x->module, y->module);
}

struct pid_count {
	pid_t pid;
	uint64_t n;
};

struct pid_counts {
	void *tree;                /* tsearch tree of struct pid_count */
	struct pid_count best;
	int err;
};

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = ((const struct pid_count *)a)->pid, y = ((const struct pid_count *)b)->pid;
	return (x > y) - (x < y);
}

static int count_pid(void *ctx, const uint64_t *ids, size_t n, pid_t pid, const char *comm,
		     uint64_t count)
{
	struct pid_counts *c = ctx;
	struct pid_count key = { .pid = pid }, *t, **slot = tfind(&key, &c->tree, cmp_pid);

	(void)ids;
	(void)n;
	(void)comm;
	if (!slot) {
		t = calloc(1, sizeof(*t));
		if (!t || !tsearch(t, &c->tree, cmp_pid)) {
			free(t);
			return -ENOMEM;
		}
		t->pid = pid;
	} else {
		t = *slot;
	}
	t->n += count;
	if (t->n > c->best.n || (t->n == c->best.n && pid < c->best.pid))
		c->best = *t;
	return 0;
}

/* The process whose executable is the profile's first mapping: the given
 * one, else the one with the most samples (ties: the lowest pid); 0 when
 * the stacks carry no pid. */
static pid_t main_pid(const struct gb_profile *p, pid_t given)
{
	struct pid_counts c = { 0 };

	if (given)
		return given;
	if (gb_profile__each_stack(p, count_pid, &c))
		c.best.pid = 0;
	tdestroy(c.tree, free);
	return c.best.pid;
}

static void order_mappings(struct enc *e, const struct gb_profile *p, pid_t given)
{
	size_t n = gb_profile__nlocs(p), k = 0;
	const struct gb_profile_loc **v = calloc(n + 1, sizeof(*v));
	struct order o;

	if (!v)
		return;    /* then in order of first use */
	o.main_pid = main_pid(p, given);
	o.exe = o.main_pid ? gb_profile__exe(p, o.main_pid) : NULL;
	for (size_t id = 1; id <= n; id++) {
		const struct gb_profile_loc *l = gb_profile__loc(p, id);
		if (l->module)
			v[k++] = l;
	}
	qsort_r(v, k, sizeof(*v), cmp_map_order, &o);
	for (size_t i = 0; i < k && !e->err; i++)
		mapping_of(e, v[i]);
	free(v);
}

static int add_locations(struct enc *e, const struct gb_profile *p)
{
	size_t n = gb_profile__nlocs(p);
	char name[512];

	e->prof.location = calloc(n + 1, sizeof(*e->prof.location));
	if (!e->prof.location)
		return -ENOMEM;
	for (size_t id = 1; id <= n && !e->err; id++) {
		const struct gb_profile_loc *l = gb_profile__loc(p, id);
		PbLocation *loc = calloc(1, sizeof(*loc) + sizeof(PbLine) + sizeof(PbLine *));
		if (!loc)
			return -ENOMEM;
		PbLine *line = (PbLine *)(loc + 1);
		PbLine **lines = (PbLine **)(line + 1);
		perftools__profiles__location__init(loc);
		perftools__profiles__line__init(line);
		loc->id = id;
		/* A caller's frame is the call instruction, as perf shows it:
		 * return address - 1, the address its line was looked up at. */
		loc->address = l->ret ? l->addr - 1 : l->addr;
		loc->mapping_id = mapping_of(e, l);
		/* The same names as --report and --folded. */
		gb_profile__loc_name(l, name, sizeof(name));
		line->function_id = function_of(e, name, l);
		line->line = l->line;
		lines[0] = line;
		loc->line = lines;
		loc->n_line = 1;
		e->prof.location[e->prof.n_location++] = loc;
	}
	return e->err;
}

static int add_sample(void *ctx, const uint64_t *ids, size_t n, pid_t pid, const char *comm,
		      uint64_t count)
{
	struct enc *e = ctx;
	size_t i = e->prof.n_sample;

	if (gb_grow((void **)&e->prof.sample, &e->cap_sample, i + 1, sizeof(PbSample *)))
		return -ENOMEM;
	PbSample *s = calloc(1, sizeof(*s) + 2 * sizeof(int64_t) + 2 * sizeof(PbLabel) +
			     2 * sizeof(PbLabel *) + n * sizeof(uint64_t));
	if (!s)
		return -ENOMEM;
	int64_t *val = (int64_t *)(s + 1);
	PbLabel *lab = (PbLabel *)(val + 2);
	PbLabel **labs = (PbLabel **)(lab + 2);
	uint64_t *locs = (uint64_t *)(labs + 2);

	perftools__profiles__sample__init(s);
	memcpy(locs, ids, n * sizeof(*ids));
	s->location_id = locs;
	s->n_location_id = n;
	val[0] = (int64_t)count;
	val[1] = (int64_t)(count * e->period_ns);
	s->value = val;
	s->n_value = 2;
	perftools__profiles__label__init(&lab[0]);
	perftools__profiles__label__init(&lab[1]);
	lab[0].key = str(e, "pid");
	lab[0].num = pid;
	lab[1].key = str(e, "comm");
	lab[1].str = str(e, comm);
	labs[0] = &lab[0];
	labs[1] = &lab[1];
	s->label = labs;
	s->n_label = pid ? 2 : 0;
	e->prof.sample[e->prof.n_sample++] = s;
	return e->err;
}

static void node_free(void *x)
{
	free(x);
}

static void enc_free(struct enc *e)
{
	for (size_t i = 0; i < e->prof.n_string_table; i++)
		free(e->prof.string_table[i]);
	free(e->prof.string_table);
	for (size_t i = 0; i < e->prof.n_mapping; i++)
		free(e->prof.mapping[i]);
	free(e->prof.mapping);
	for (size_t i = 0; i < e->prof.n_function; i++)
		free(e->prof.function[i]);
	free(e->prof.function);
	for (size_t i = 0; i < e->prof.n_location; i++)
		free(e->prof.location[i]);
	free(e->prof.location);
	for (size_t i = 0; i < e->prof.n_sample; i++)
		free(e->prof.sample[i]);
	free(e->prof.sample);
	free(e->prof.sample_type ? e->prof.sample_type[0] : NULL);
	free(e->prof.sample_type);
	tdestroy(e->strings, node_free);
	tdestroy(e->mappings, node_free);
	tdestroy(e->functions, node_free);
}

static int gz_write_all(int fd, const uint8_t *buf, size_t len, const char *name)
{
	int dfd = dup(fd);
	gzFile gz = dfd >= 0 ? gzdopen(dfd, "wb") : NULL;
	int err = 0;

	if (!gz) {
		if (dfd >= 0)
			close(dfd);
		gb_err("sample: %s: %s", name, strerror(ENOMEM));
		return -ENOMEM;
	}
	while (len && !err) {
		unsigned chunk = len > (1u << 30) ? 1u << 30 : (unsigned)len;
		int n = gzwrite(gz, buf, chunk);
		if (n <= 0)
			err = errno ? -errno : -EIO;
		buf += n > 0 ? n : 0;
		len -= n > 0 ? (size_t)n : 0;
	}
	if (gzclose(gz) != Z_OK && !err)
		err = errno ? -errno : -EIO;
	if (err)
		gb_err("sample: %s: write: %s", name, strerror(-err));
	return err;
}

int gb_pprof_write(const struct gb_profile *p, const struct gb_pprof_info *info, int fd,
		   const char *name)
{
	struct enc e = { .period_ns = info->period_ns };
	PbValueType *vt = calloc(3, sizeof(*vt));
	uint8_t *buf = NULL;
	int err;

	perftools__profiles__profile__init(&e.prof);
	e.prof.sample_type = calloc(2, sizeof(*e.prof.sample_type));
	if (!vt || !e.prof.sample_type) {
		free(vt);
		err = -ENOMEM;
		goto out;
	}
	str(&e, "");                   /* string 0 is always "" */
	for (int i = 0; i < 3; i++)
		perftools__profiles__value_type__init(&vt[i]);
	vt[0].type = str(&e, "samples");
	vt[0].unit = str(&e, "count");
	vt[1].type = vt[2].type = str(&e, "cpu");
	vt[1].unit = vt[2].unit = str(&e, "nanoseconds");
	e.prof.sample_type[0] = &vt[0];
	e.prof.sample_type[1] = &vt[1];
	e.prof.n_sample_type = 2;
	e.prof.period_type = &vt[2];
	e.prof.period = (int64_t)info->period_ns;
	e.prof.time_nanos = info->time_ns;
	e.prof.duration_nanos = info->duration_ns;

	order_mappings(&e, p, info->main_pid);
	err = e.err ? e.err : add_locations(&e, p);
	if (!err)
		err = gb_profile__each_stack(p, add_sample, &e);
	if (!err)
		err = e.err;
	if (err)
		goto out;
	size_t len = perftools__profiles__profile__get_packed_size(&e.prof);
	buf = malloc(len ? len : 1);
	if (!buf) {
		err = -ENOMEM;
		goto out;
	}
	perftools__profiles__profile__pack(&e.prof, buf);
	err = gz_write_all(fd, buf, len, name);
	free(buf);
	enc_free(&e);
	return err;
out:
	if (err == -ENOMEM)
		gb_err("sample: %s: %s", name, strerror(ENOMEM));
	enc_free(&e);
	return err;
}
