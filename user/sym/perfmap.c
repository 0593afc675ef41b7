/* JIT code's names from /tmp/perf-PID.map: perfmap.h. */
#include "sym/perfmap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/bound.h"
#include "common/grow.h"

struct piece {
	uint64_t start, size;
	uint64_t seq;            /* its line's order in the file */
	char *name;
};

struct gb_perfmap {
	char *path;              /* where this process reads it */
	char *name;              /* where the target wrote it */
	long off;                /* bytes read so far (whole lines) */
	struct piece *v;         /* by start, then seq */
	size_t n, cap;
	uint64_t seq;
};

/* The pid of process pid in its own pid namespace (NSpid's last field). */
static long ns_pid(pid_t pid)
{
	char path[64], line[256];
	long v = pid;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "NSpid:", 6)) {
			char *s = line + 6, *e;
			for (long x; (x = strtol(s, &e, 10)), e != s; s = e)
				v = x;
			break;
		}
	if (f)
		fclose(f);
	return v;
}

struct gb_perfmap *gb_perfmap__open_file(const char *path, const char *name)
{
	struct gb_perfmap *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->path = strdup(path);
	m->name = strdup(name);
	if (!m->path || !m->name) {
		gb_perfmap__free(m);
		return NULL;
	}
	return m;
}

struct gb_perfmap *gb_perfmap__open(pid_t pid)
{
	char path[96], name[64];
	long ns = ns_pid(pid);
	snprintf(path, sizeof(path), "/proc/%d/root/tmp/perf-%ld.map", (int)pid, ns);
	snprintf(name, sizeof(name), "/tmp/perf-%ld.map", ns);
	return gb_perfmap__open_file(path, name);
}

static int cmp_piece(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* One line, "START SIZE NAME" (no newline): 0, 1 if it is not one, or
 * -ENOMEM. */
static int add_line(struct gb_perfmap *m, char *s)
{
	char *e;
	uint64_t start = strtoull(s, &e, 16);
	if (e == s || *e != ' ')
		return 1;
	s = e + 1;
	uint64_t size = strtoull(s, &e, 16);
	if (e == s || *e != ' ' || !size || !e[1])
		return 1;
	if (GB_GROW(&m->v, &m->cap, m->n + 1))
		return -ENOMEM;
	char *name = strdup(e + 1);
	if (!name)
		return -ENOMEM;
	m->v[m->n++] = (struct piece){ start, size, m->seq++, name };
	return 0;
}

/* The lines written since the last read.  0, or -ENOMEM. */
static int read_more(struct gb_perfmap *m)
{
	FILE *f = fopen(m->path, "r");
	if (!f)
		return 0;
	size_t had = m->n;
	int r = 0;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	if (fseek(f, m->off, SEEK_SET) == 0)
		while (!r && (len = getline(&line, &cap, f)) > 0 && line[len - 1] == '\n') {
			m->off += len;
			line[len - 1] = 0;
			r = add_line(m, line) < 0 ? -ENOMEM : 0;
		}
	free(line);
	fclose(f);
	if (m->n != had)
		qsort(m->v, m->n, sizeof(*m->v), cmp_piece);
	return r;
}

static const struct piece *find(const struct gb_perfmap *m, uint64_t addr)
{
	size_t i = GB_UPPER(m->v, m->n, start, addr); /* the first start > addr */
	const struct piece *best = NULL;
	/* (pieces before it that hold addr: the latest line's wins; a map
	 * whose pieces nest deeper than this is not one a runtime writes) */
	for (size_t k = 0; i > 0 && k < 256; k++, i--) {
		const struct piece *p = &m->v[i - 1];
		if (addr - p->start < p->size && (!best || p->seq > best->seq))
			best = p;
	}
	return best;
}

const char *gb_perfmap__lookup(struct gb_perfmap *m, uint64_t addr, uint64_t *start,
			       uint64_t *size)
{
	struct stat st;
	if (stat(m->path, &st) == 0 && st.st_size > m->off && read_more(m))
		return NULL; /* (ENOMEM, said) */
	const struct piece *p = find(m, addr);
	if (!p)
		return NULL;
	*start = p->start;
	*size = p->size;
	return p->name;
}

const char *gb_perfmap__name(const struct gb_perfmap *m)
{
	return m->name;
}

void gb_perfmap__free(struct gb_perfmap *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].name);
	free(m->v);
	free(m->path);
	free(m->name);
	free(m);
}
