/* gebpf diff of two JSONL traces: the first record where they diverge, with
 * context, and the counts per line type.
 *
 * Normalisation undoes exactly the emulator quirks docs/testing.md lists, on both
 * sides, so a native trace compares with a QEMU or lackey one:
 *   qemu:   accesses wider than 8 bytes split into contiguous 8-byte pieces
 *           (merged back: same type, vcpu, pc and vt); an SMC store logged
 *           twice (consecutive identical writes kept once).
 *   lackey: the extra exec without accesses when a REP loop ends (an exec
 *           with no accesses right after an exec of the same pc that had
 *           some is dropped); the double read of locked RMW / xchg
 *           (consecutive identical reads kept once).
 *   both:   CMPS: QEMU and lackey read ES:(RDI) before DS:(RSI), hardware and
 *           gebpf the other way round (tests/progs/cmps_order.c).  A trace
 *           has no registers, so the pair is put in one order on both sides:
 *           an instruction whose accesses are exactly two reads of the same
 *           size 1, 2, 4 or 8 has them in address order.
 * After a normalisation vt is renumbered (exec lines 0, 1, 2, ...) and the
 * summary lines, whose counts differ by construction, are left out.
 */
#include "record/trace_diff.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/grow.h"
#include "common/log.h"

struct rec {
	char t[8];                  /* exec read write fault summary, or "" (other) */
	int64_t vcpu, size, vt;
	uint64_t addr, pc, err;
	bool has_err;
	char *raw;                  /* the line as read (other/summary lines) */
	long lineno;
};

struct trace {
	struct rec *v;
	size_t n, cap;
};

static void trace_free(struct trace *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].raw);
	free(t->v);
}

static uint64_t hexval(const cJSON *o, const char *k)
{
	const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
	return s ? strtoull(s, NULL, 16) : 0;
}

static int64_t numval(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;
}

static int load(const char *path, struct trace *t)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	long no = 0;
	int r = 0;
	if (!f)
		return gb_fail(-errno, "%s: %s", path, strerror(errno));
	while ((len = getline(&line, &cap, f)) >= 0) {
		no++;
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = 0;
		if (!len)
			continue;
		cJSON *o = cJSON_ParseWithLength(line, (size_t)len);
		const char *ty = o ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "t")) : NULL;
		if (!ty) {
			cJSON_Delete(o);
			r = gb_fail(-EINVAL, "%s:%ld: not a trace line (a JSON object with \"t\")", path,
				    no);
			break;
		}
		if (GB_GROW(&t->v, &t->cap, t->n + 1)) {
			cJSON_Delete(o);
			r = -ENOMEM;   /* said by GB_GROW */
			break;
		}
		struct rec *x = &t->v[t->n++];
		memset(x, 0, sizeof(*x));
		x->lineno = no;
		bool known = !strcmp(ty, "exec") || !strcmp(ty, "read") || !strcmp(ty, "write") ||
			     !strcmp(ty, "fault");
		if (known) {
			snprintf(x->t, sizeof(x->t), "%s", ty);
			x->vcpu = numval(o, "vcpu");
			x->size = numval(o, "size");
			x->vt = numval(o, "vt");
			x->addr = hexval(o, "addr");
			x->pc = hexval(o, "pc");
			x->has_err = cJSON_GetObjectItemCaseSensitive(o, "err") != NULL;
			x->err = hexval(o, "err");
		} else if (!strcmp(ty, "summary")) {
			snprintf(x->t, sizeof(x->t), "summary");
		}
		x->raw = strdup(line);
		cJSON_Delete(o);
	}
	free(line);
	fclose(f);
	return r;
}

static bool is_access(const struct rec *x)
{
	return !strcmp(x->t, "read") || !strcmp(x->t, "write");
}

static bool same_insn(const struct rec *x, const struct rec *y)
{
	return x->vcpu == y->vcpu && x->pc == y->pc && x->vt == y->vt;
}

static void drop(struct trace *t, size_t i)
{
	free(t->v[i].raw);
	memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof(t->v[0]));
	t->n--;
}

static void normalise(struct trace *t, enum gb_norm norm)
{
	for (size_t i = 0; i < t->n; i++) {
		if (!strcmp(t->v[i].t, "summary")) {
			drop(t, i--);
			continue;
		}
		if (i == 0)
			continue;
		struct rec *p = &t->v[i - 1], *x = &t->v[i];
		if (norm == GB_NORM_QEMU && is_access(p) && !strcmp(p->t, x->t) && same_insn(p, x) &&
		    x->size == 8 && p->size >= 8 && p->size % 8 == 0 && p->addr + (uint64_t)p->size == x->addr) {
			p->size += 8;
			drop(t, i--);
		} else if (((norm == GB_NORM_QEMU && !strcmp(x->t, "write")) ||
			    (norm == GB_NORM_LACKEY && !strcmp(x->t, "read"))) &&
			   !strcmp(p->t, x->t) && same_insn(p, x) && p->addr == x->addr && p->size == x->size) {
			drop(t, i--);
		}
	}
	if (norm == GB_NORM_LACKEY) {
		/* The extra exec at the end of a REP loop. */
		size_t last_exec = SIZE_MAX;
		bool last_had_access = false;
		for (size_t i = 0; i < t->n; i++) {
			struct rec *x = &t->v[i];
			if (strcmp(x->t, "exec")) {
				if (is_access(x))
					last_had_access = true;
				continue;
			}
			bool has_access = i + 1 < t->n && is_access(&t->v[i + 1]);
			if (last_exec != SIZE_MAX && last_had_access && !has_access &&
			    t->v[last_exec].pc == x->pc && t->v[last_exec].vcpu == x->vcpu) {
				drop(t, i--);
				last_had_access = false;
				continue;
			}
			last_exec = i;
			last_had_access = false;
		}
	}
	/* CMPS's two reads (see the top of this file). */
	for (size_t i = 0; i + 2 < t->n; i++) {
		struct rec *x = &t->v[i], *r1 = &t->v[i + 1], *r2 = &t->v[i + 2];
		bool pair = !strcmp(x->t, "exec") && !strcmp(r1->t, "read") && !strcmp(r2->t, "read") &&
			    same_insn(x, r1) && same_insn(x, r2) && r1->size == r2->size &&
			    (r1->size == 1 || r1->size == 2 || r1->size == 4 || r1->size == 8) &&
			    (i + 3 == t->n || !is_access(&t->v[i + 3]) || !same_insn(x, &t->v[i + 3]));
		if (pair && r1->addr > r2->addr) {
			struct rec tmp = *r1;
			*r1 = *r2;
			*r2 = tmp;
		}
	}
	/* Renumber vt: exec lines count up, accesses take their exec's. */
	int64_t vt = -1;
	for (size_t i = 0; i < t->n; i++) {
		if (!strcmp(t->v[i].t, "exec"))
			vt++;
		if (t->v[i].t[0] && vt >= 0)
			t->v[i].vt = vt;
	}
}

/* The record as compared (and printed): canonical field order, ignored
 * fields left out. */
static void render(const struct rec *x, const struct gb_trace_diff_opts *o, char *buf, size_t len)
{
	if (!x->t[0] || !strcmp(x->t, "summary")) {
		snprintf(buf, len, "%s", x->raw);
		return;
	}
	int n = snprintf(buf, len, "{\"t\":\"%s\"", x->t);
	if (!o->ignore_vcpu)
		n += snprintf(buf + n, len - (size_t)n, ",\"vcpu\":%" PRId64, x->vcpu);
	if (strcmp(x->t, "exec"))
		n += snprintf(buf + n, len - (size_t)n, ",\"addr\":\"0x%" PRIx64 "\"", x->addr);
	if (is_access(x))
		n += snprintf(buf + n, len - (size_t)n, ",\"size\":%" PRId64, x->size);
	n += snprintf(buf + n, len - (size_t)n, ",\"pc\":\"0x%" PRIx64 "\"", x->pc);
	if (x->has_err)
		n += snprintf(buf + n, len - (size_t)n, ",\"err\":\"0x%" PRIx64 "\"", x->err);
	if (!o->ignore_vt)
		n += snprintf(buf + n, len - (size_t)n, ",\"vt\":%" PRId64, x->vt);
	snprintf(buf + n, len - (size_t)n, "}");
}

static void counts(const struct trace *t, FILE *out, const char *name)
{
	size_t c[4] = { 0 };
	static const char *ty[4] = { "exec", "read", "write", "fault" };
	for (size_t i = 0; i < t->n; i++)
		for (int k = 0; k < 4; k++)
			c[k] += !strcmp(t->v[i].t, ty[k]);
	fprintf(out, "%s: exec %zu, read %zu, write %zu, fault %zu, lines %zu\n", name, c[0], c[1], c[2], c[3],
		t->n);
}

int gb_trace_diff(const char *pa, const char *pb, const struct gb_trace_diff_opts *o, FILE *out)
{
	struct trace a = { 0 }, b = { 0 };
	int r = load(pa, &a);
	if (!r)
		r = load(pb, &b);
	if (r)
		goto cleanup;
	if (o->norm) {
		normalise(&a, o->norm);
		normalise(&b, o->norm);
	}
	char la[512], lb[512];
	size_t i = 0;
	for (; i < a.n && i < b.n; i++) {
		render(&a.v[i], o, la, sizeof(la));
		render(&b.v[i], o, lb, sizeof(lb));
		if (strcmp(la, lb))
			break;
	}
	if (i == a.n && i == b.n) {
		r = 0;
		goto cleanup;
	}
	fprintf(out, "traces differ at record %zu (%s line %ld, %s line %ld):\n", i + 1, pa,
		i < a.n ? a.v[i].lineno : -1L, pb, i < b.n ? b.v[i].lineno : -1L);
	for (size_t k = i > (size_t)o->context ? i - (size_t)o->context : 0; k < i; k++) {
		render(&a.v[k], o, la, sizeof(la));
		fprintf(out, "  %s\n", la);
	}
	if (i < a.n)
		render(&a.v[i], o, la, sizeof(la));
	if (i < b.n)
		render(&b.v[i], o, lb, sizeof(lb));
	fprintf(out, "- %s\n+ %s\n", i < a.n ? la : "(end of trace)", i < b.n ? lb : "(end of trace)");
	counts(&a, out, pa);
	counts(&b, out, pb);
	r = 1;
cleanup:
	trace_free(&a);
	trace_free(&b);
	return r;
}
