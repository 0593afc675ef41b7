/* Naming CPython code objects: pycode.h. */
#include "sample/pycode.h"

#include <errno.h>
#include <search.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "ptrace/mem.h"

#define HDR_MAX 256             /* bytes of a code object's header compared */
#define STR_MAX 1024            /* characters of a name read */
#define TABLE_MAX (1u << 20)    /* bytes of a line table read */

struct code_ent {
	pid_t pid;
	uint64_t code;
	uint8_t hdr[HDR_MAX];      /* the header as read */
	size_t hdr_len;
	uint8_t *table;            /* co_linetable's bytes */
	size_t table_len;
	uint64_t checked_ns;       /* when the header was last read (CLOCK_MONOTONIC) */
	struct gb_pyfunc f;
};

struct gb_pycode {
	void *tree;                /* struct code_ent, by (pid, code) */
	uint64_t next_id;
};

static int cmp_entry(const void *a, const void *b)
{
	const struct code_ent *x = a, *y = b;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return (x->code > y->code) - (x->code < y->code);
}

struct gb_pycode *gb_pycode__new(void)
{
	return calloc(1, sizeof(struct gb_pycode));
}

static void entry_clear(struct code_ent *e)
{
	free(e->table);
	free(e->f.name);
	free(e->f.file);
	e->table = NULL;
	e->f.name = e->f.file = NULL;
}

static void entry_free(void *x)
{
	entry_clear(x);
	free(x);
}

void gb_pycode__free(struct gb_pycode *c)
{
	if (!c)
		return;
	tdestroy(c->tree, entry_free);
	free(c);
}

static uint64_t word(const uint8_t *hdr, uint32_t off)
{
	uint64_t v;
	memcpy(&v, hdr + off, sizeof(v));
	return v;
}

static void put_utf8(char **o, char *end, uint32_t cp)
{
	char b[4];
	int n;

	if (cp < 0x80) {
		b[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		b[0] = (char)(0xc0 | cp >> 6);
		b[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		b[0] = (char)(0xe0 | cp >> 12);
		b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		b[0] = (char)(0xf0 | cp >> 18);
		b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	if (end - *o > n) {
		memcpy(*o, b, (size_t)n);
		*o += n;
	}
}

/* A str object (compact: every string the compiler makes) as UTF-8. */
static char *read_str(pid_t pid, const struct gb_py_code_layout *L, uint64_t obj)
{
	uint8_t hdr[128];
	int64_t n;
	uint32_t state, kind;
	bool ascii;
	uint8_t *raw;
	char *out, *o;

	if (!obj || L->str_compact_data > sizeof(hdr) ||
	    gb_mem_read(pid, obj, hdr, L->str_compact_data) != (ssize_t)L->str_compact_data)
		return NULL;
	memcpy(&n, hdr + L->str_length, sizeof(n));
	memcpy(&state, hdr + L->str_state, sizeof(state));
	kind = (state >> 2) & 7;
	ascii = (state >> 6) & 1;
	if (!((state >> 5) & 1) || n < 0 || (kind != 1 && kind != 2 && kind != 4))
		return NULL;    /* not compact (a legacy string), or not a string */
	if (n > STR_MAX)
		n = STR_MAX;
	raw = malloc((size_t)n * kind + 1);
	out = malloc((size_t)n * 4 + 1);
	if (!raw || !out ||
	    gb_mem_read(pid, obj + (ascii ? L->str_ascii_data : L->str_compact_data), raw,
			(size_t)n * kind) != (ssize_t)((size_t)n * kind)) {
		free(raw);
		free(out);
		return NULL;
	}
	o = out;
	for (int64_t i = 0; i < n; i++) {
		uint32_t cp = kind == 1 ? raw[i] : kind == 2 ? ((uint16_t *)raw)[i] :
			      ((uint32_t *)raw)[i];
		/* Not a string's character: read while the object changed
		 * (freed, reused: the target runs on), so not a name.  A lone
		 * surrogate (a file name's undecodable byte, surrogateescape)
		 * is U+FFFD: UTF-8 has no form for it. */
		if (cp > 0x10ffff || (ascii && cp >= 0x80)) {
			free(raw);
			free(out);
			return NULL;
		}
		if (cp >= 0xd800 && cp <= 0xdfff)
			cp = 0xfffd;
		put_utf8(&o, out + n * 4 + 1, cp);
	}
	*o = 0;
	free(raw);
	return out;
}

/* A bytes object's contents. */
static uint8_t *read_bytes(pid_t pid, const struct gb_py_code_layout *L, uint64_t obj,
			   size_t *len)
{
	int64_t n = 0;
	uint8_t *b;

	*len = 0;
	if (!obj || gb_mem_read(pid, obj + L->bytes_size, &n, sizeof(n)) != sizeof(n) || n < 0 ||
	    n > TABLE_MAX)
		return NULL;
	b = malloc((size_t)n + 1);
	if (b && gb_mem_read(pid, obj + L->bytes_data, b, (size_t)n) != (ssize_t)n) {
		free(b);
		return NULL;
	}
	*len = (size_t)n;
	return b;
}

static int varint(const uint8_t *t, size_t len, size_t *p)
{
	unsigned v = 0, shift = 0;
	uint8_t b;

	do {
		if (*p >= len || shift > 24)
			return 0;
		b = t[(*p)++];
		v |= (unsigned)(b & 63) << shift;
		shift += 6;
	} while (b & 64);
	return (int)v;
}

static int svarint(const uint8_t *t, size_t len, size_t *p)
{
	int v = varint(t, len, p);
	return v & 1 ? -(v >> 1) : v >> 1;
}

int gb_pycode_line(const uint8_t *t, size_t len, int first_line, int32_t lasti)
{
	int line = first_line;
	int64_t addr = 0;
	size_t p = 0;

	if (lasti < 0)
		return first_line;
	while (p < len) {
		uint8_t b = t[p++];
		int code = (b >> 3) & 15, n = (b & 7) + 1;

		if (!(b & 0x80))
			break;          /* not the start of an entry: a table we cannot read */
		if (code == 14) {       /* long form: line delta, end line, columns */
			line += svarint(t, len, &p);
			varint(t, len, &p);
			varint(t, len, &p);
			varint(t, len, &p);
		} else if (code == 13) {   /* no column */
			line += svarint(t, len, &p);
		} else if (code >= 10 && code <= 12) {   /* one line: delta code - 10, 2 columns */
			line += code - 10;
			p += 2;
		} else if (code < 10) {   /* short form: same line, 1 byte of columns */
			p += 1;
		}                         /* 15: no location (the line stays) */
		if (lasti < addr + n)
			return line;
		addr += n;
	}
	return line;
}

void gb_pycode_module(const char *file, char *buf, size_t len)
{
	static const char *const roots[] = { "/site-packages/", "/dist-packages/" };
	const char *rel = NULL, *s;
	size_t n;

	if (!strncmp(file, "<frozen ", 8) && (n = strlen(file)) > 9 && file[n - 1] == '>') {
		snprintf(buf, len, "%.*s", (int)(n - 9), file + 8);
		return;
	}
	if (file[0] == '<') {
		snprintf(buf, len, "%s", file);
		return;
	}
	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++)
		if ((s = strstr(file, roots[i])) && (!rel || s + strlen(roots[i]) > rel))
			rel = s + strlen(roots[i]);
	if (!rel && (s = strstr(file, "/lib/python")) && (s = strchr(s + 11, '/')))
		rel = s + 1;
	if (!rel)
		rel = (s = strrchr(file, '/')) ? s + 1 : file;
	snprintf(buf, len, "%s", rel);
	n = strlen(buf);
	if (n > 3 && !strcmp(buf + n - 3, ".py"))
		buf[n -= 3] = 0;
	if (n > 9 && !strcmp(buf + n - 9, "/__init__"))
		buf[n -= 9] = 0;
	for (char *c = buf; *c; c++)
		if (*c == '/')
			*c = '.';
}

/* Read code object e->code into e (its header already in e->hdr). */
static int read_code(struct gb_pycode *c, struct code_ent *e, const struct gb_pyruntime *rt)
{
	const struct gb_py_code_layout *L = &rt->code;
	char *qual = read_str(e->pid, L, word(e->hdr, L->co_qualname));
	char module[512];
	int32_t first;

	if (!qual)
		qual = read_str(e->pid, L, word(e->hdr, L->co_name));
	e->f.file = read_str(e->pid, L, word(e->hdr, L->co_filename));
	if (!qual || !e->f.file) {
		free(qual);
		entry_clear(e);
		return -ENOENT;
	}
	gb_pycode_module(e->f.file, module, sizeof(module));
	if (asprintf(&e->f.name, "%s%s%s", module, module[0] ? "." : "", qual) < 0)
		e->f.name = NULL;
	free(qual);
	memcpy(&first, e->hdr + L->co_firstlineno, sizeof(first));
	e->f.first_line = first;
	e->table = read_bytes(e->pid, L, word(e->hdr, L->co_linetable), &e->table_len);
	e->f.id = ++c->next_id;
	if (!e->f.name) {
		entry_clear(e);
		return -ENOMEM;
	}
	return 0;
}

const struct gb_pyfunc *gb_pycode__name(struct gb_pycode *c, pid_t pid,
					 const struct gb_pyruntime *rt, uint64_t code,
					 int32_t lasti, uint64_t ns, int *line)
{
	const struct gb_py_code_layout *L = &rt->code;
	struct code_ent key = { .pid = pid, .code = code }, *e, **slot;
	uint8_t hdr[HDR_MAX];
	size_t hlen = L->co_linetable + 8;
	bool readable;

	*line = 0;
	if (hlen > HDR_MAX || L->co_firstlineno + 4 > hlen || !code)
		return NULL;
	slot = tfind(&key, &c->tree, cmp_entry);
	e = slot ? *slot : NULL;
	if (e && e->f.name && ns && ns <= e->checked_ns)
		goto named;     /* checked after this sample was taken */
	readable = gb_mem_read(pid, code, hdr, hlen) == (ssize_t)hlen;
	if (e && e->f.name && (!readable || (word(hdr, L->ob_type) == rt->code_type && !memcmp(hdr + L->co_firstlineno,
						   e->hdr + L->co_firstlineno,
						   hlen - L->co_firstlineno)))) {
		e->checked_ns = gb_mono_ns();
		goto named;
	}     /* the same object (or the process is gone: the last name) */
	if (!readable || word(hdr, L->ob_type) != rt->code_type)
		return NULL;    /* not a code object (now) */
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e)
			return NULL;
		*e = key;
		if (!tsearch(e, &c->tree, cmp_entry)) {
			free(e);
			return NULL;
		}
	}
	entry_clear(e);     /* freed and replaced: read anew */
	e->checked_ns = gb_mono_ns();
	memcpy(e->hdr, hdr, hlen);
	e->hdr_len = hlen;
	if (read_code(c, e, rt))
		return NULL;
named:
	*line = gb_pycode_line(e->table, e->table_len, e->f.first_line, lasti);
	return &e->f;
}
