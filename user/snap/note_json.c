/* The GEBPF JSON note: vtrace's snapshot dict (version, meta, exe, threads,
 * regs, maps, mem, stacktrace, fds, vars) as one compact JSON document.
 * Schema: docs/snapshot-format.md.  Keys are emitted in a fixed order and
 * numbers that can exceed 2^53 (addresses, registers) are hex strings, so the
 * same snapshot always gives the same bytes. */
#include "snap/note_json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "snap/fdkind.h"
#include "common/log.h"

#define R(n) { #n, offsetof(struct user_regs_struct, n) }
const struct gb_snap_regdesc gb_snap__regs[] = {
	R(rax), R(rbx), R(rcx), R(rdx), R(rsi), R(rdi), R(rbp), R(rsp),
	R(r8), R(r9), R(r10), R(r11), R(r12), R(r13), R(r14), R(r15),
	R(rip), R(eflags), R(orig_rax), R(cs), R(ss), R(ds), R(es), R(fs), R(gs),
	R(fs_base), R(gs_base),
};
#undef R
const size_t gb_snap__nregs = sizeof(gb_snap__regs) / sizeof(gb_snap__regs[0]);

static cJSON *hex(uint64_t v)
{
	char b[24];
	snprintf(b, sizeof(b), "0x%" PRIx64, v);
	return cJSON_CreateString(b);
}

static cJSON *str_or_null(const char *s)
{
	return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static cJSON *build_meta(const struct gb_snapshot *s)
{
	cJSON *m = cJSON_CreateObject();
	cJSON_AddItemToObject(m, "architecture", str_or_null(s->meta.arch));
	cJSON_AddItemToObject(m, "platform", str_or_null(s->meta.platform));
	cJSON_AddNumberToObject(m, "pid", s->meta.pid);
	cJSON_AddNumberToObject(m, "tid", s->meta.tid);
	if (s->meta.vt >= 0)
		cJSON_AddNumberToObject(m, "vt", (double)s->meta.vt);
	else
		cJSON_AddNullToObject(m, "vt");
	cJSON_AddItemToObject(m, "point", str_or_null(s->meta.point));
	cJSON_AddItemToObject(m, "kernel", str_or_null(s->meta.kernel));
	return m;
}

static cJSON *build_regs(const struct user_regs_struct *r)
{
	cJSON *o = cJSON_CreateObject();
	for (size_t i = 0; i < gb_snap__nregs; i++) {
		uint64_t v;
		memcpy(&v, (const char *)r + gb_snap__regs[i].off, sizeof(v));
		cJSON_AddItemToObject(o, gb_snap__regs[i].name, hex(v));
	}
	return o;
}

char *gb_snap__json_build(const struct gb_snapshot *s, size_t *len)
{
	cJSON *root = cJSON_CreateObject();
	if (!root)
		return NULL;
	cJSON_AddNumberToObject(root, "version", GB_SNAP_VERSION);
	cJSON_AddItemToObject(root, "meta", build_meta(s));
	cJSON_AddItemToObject(root, "exe", str_or_null(s->exe));

	cJSON *threads = cJSON_AddArrayToObject(root, "threads");
	cJSON *regs = cJSON_AddArrayToObject(root, "regs");
	for (size_t i = 0; i < s->nthreads; i++) {
		const struct gb_snap_thread *t = &s->threads[i];
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "index", (double)i);
		cJSON_AddNumberToObject(o, "tid", t->tid);
		cJSON_AddNumberToObject(o, "signal", t->cursig);
		gb_snap__json_tstate(o, &t->ks);
		cJSON_AddItemToArray(threads, o);
		cJSON_AddItemToArray(regs, build_regs(&t->regs));
	}

	cJSON *maps = cJSON_AddArrayToObject(root, "maps");
	cJSON *mem = cJSON_AddArrayToObject(root, "mem");
	for (size_t i = 0; i < s->nmaps; i++) {
		const struct gb_snap_map *m = &s->maps[i];
		cJSON *a = cJSON_CreateArray();
		cJSON_AddItemToArray(a, hex(m->start));
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)(m->end - m->start)));
		cJSON_AddItemToArray(a, cJSON_CreateString(m->perms));
		cJSON_AddItemToArray(a, cJSON_CreateString(m->path ? m->path : ""));
		cJSON_AddItemToArray(maps, a);
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToObject(o, "base", hex(m->start));
		cJSON_AddNumberToObject(o, "offset", (double)m->core_off);
		bool b = gb_snap_map_has_bytes(m);
		cJSON_AddNumberToObject(o, "size", b ? (double)(m->end - m->start) : 0);
		cJSON_AddItemToObject(o, "sha256", b && m->sha256[0] ? cJSON_CreateString(m->sha256)
									 : cJSON_CreateNull());
		cJSON_AddItemToArray(mem, o);
	}

	cJSON *st = cJSON_AddArrayToObject(root, "stacktrace");
	for (size_t i = 0; i < s->nthreads; i++) {
		const struct gb_snap_thread *t = &s->threads[i];
		cJSON *a = cJSON_CreateArray();
		for (size_t j = 0; j < t->nframes; j++) {
			cJSON *f = cJSON_CreateObject();
			cJSON_AddItemToObject(f, "pc", hex(t->frames[j].pc));
			cJSON_AddItemToObject(f, "sp", hex(t->frames[j].sp));
			cJSON_AddItemToObject(f, "symbol", str_or_null(t->frames[j].symbol));
			cJSON_AddItemToObject(f, "function", str_or_null(t->frames[j].function));
			cJSON_AddItemToArray(a, f);
		}
		cJSON_AddItemToArray(st, a);
	}

	cJSON *fds = cJSON_AddArrayToObject(root, "fds");
	for (size_t i = 0; i < s->nfds; i++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "fd", s->fds[i].fd);
		cJSON_AddItemToObject(o, "target", str_or_null(s->fds[i].target));
		cJSON_AddItemToObject(o, "flags", hex(s->fds[i].flags));
		cJSON_AddNumberToObject(o, "offset", (double)s->fds[i].pos);
		gb_fdk_to_json(o, s->fds[i].k);
		cJSON_AddItemToArray(fds, o);
	}

	cJSON *vars = cJSON_AddObjectToObject(root, "vars");
	for (size_t i = 0; i < s->nvars; i++)
		cJSON_AddStringToObject(vars, s->vars[i].key, s->vars[i].value);
	cJSON_AddItemToObject(root, "process", gb_snap__json_pstate(&s->pk));

	char *text = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (text && len)
		*len = strlen(text);
	return text;
}

/* ---- reading the note back ---- */

/* path: "WHAT: PATH" or "PATH", as the reader says it. */
static int bad(const char *path, const char *why)
{
	return gb_fail(-EINVAL, "%s: JSON note: %s", path, why);
}

static int get_hex(const cJSON *j, uint64_t *out)
{
	const char *s = cJSON_GetStringValue(j);
	char *end;
	if (!s || strncmp(s, "0x", 2))
		return -EINVAL;
	errno = 0;
	*out = strtoull(s + 2, &end, 16);
	return errno || *end || end == s + 2 ? -EINVAL : 0;
}

static char *dup_str(const cJSON *j)
{
	const char *s = cJSON_GetStringValue(j);
	return s ? strdup(s) : NULL;
}

static int apply_meta(struct gb_snapshot *s, const cJSON *m, const char *path)
{
	if (!cJSON_IsObject(m))
		return bad(path, "\"meta\" is not an object");
	s->meta.arch = dup_str(cJSON_GetObjectItemCaseSensitive(m, "architecture"));
	s->meta.platform = dup_str(cJSON_GetObjectItemCaseSensitive(m, "platform"));
	s->meta.point = dup_str(cJSON_GetObjectItemCaseSensitive(m, "point"));
	s->meta.kernel = dup_str(cJSON_GetObjectItemCaseSensitive(m, "kernel"));
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, "pid");
	if (cJSON_IsNumber(v))
		s->meta.pid = (int32_t)v->valuedouble;
	v = cJSON_GetObjectItemCaseSensitive(m, "tid");
	if (cJSON_IsNumber(v))
		s->meta.tid = (int32_t)v->valuedouble;
	v = cJSON_GetObjectItemCaseSensitive(m, "vt");
	s->meta.vt = cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;
	return 0;
}

static int apply_maps(struct gb_snapshot *s, const cJSON *maps, const char *path)
{
	if (!cJSON_IsArray(maps) || (size_t)cJSON_GetArraySize(maps) != s->nmaps)
		return bad(path, "\"maps\" does not list one entry per PT_LOAD");
	size_t i = 0;
	const cJSON *a;
	cJSON_ArrayForEach(a, maps) {
		uint64_t base;
		struct gb_snap_map *m = &s->maps[i++];
		if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 4 || get_hex(cJSON_GetArrayItem(a, 0), &base) ||
		    base != m->start)
			return bad(path, "\"maps\" entry does not match its PT_LOAD");
		const char *perms = cJSON_GetStringValue(cJSON_GetArrayItem(a, 2));
		const char *path = cJSON_GetStringValue(cJSON_GetArrayItem(a, 3));
		if (!perms || strlen(perms) != 4 || !path)
			return bad(path, "\"maps\" entry needs perms and file strings");
		memcpy(m->perms, perms, 5);
		char *p = strdup(path);
		if (!p)
			return gb_fail(-ENOMEM, "%s: out of memory", path);
		free(m->path);
		m->path = p;
	}
	return 0;
}

static int apply_stacks(struct gb_snapshot *s, const cJSON *st, const char *path)
{
	if (!cJSON_IsArray(st) || (size_t)cJSON_GetArraySize(st) != s->nthreads)
		return bad(path, "\"stacktrace\" does not list one entry per thread");
	size_t i = 0;
	const cJSON *a;
	cJSON_ArrayForEach(a, st) {
		struct gb_snap_thread *t = &s->threads[i++];
		int n = cJSON_GetArraySize(a);
		if (!cJSON_IsArray(a))
			return bad(path, "\"stacktrace\" entry is not an array");
		t->frames = n ? calloc((size_t)n, sizeof(*t->frames)) : NULL;
		if (n && !t->frames)
			return gb_fail(-ENOMEM, "%s: out of memory", path);
		const cJSON *f;
		cJSON_ArrayForEach(f, a) {
			struct gb_snap_frame *fr = &t->frames[t->nframes++];
			if (get_hex(cJSON_GetObjectItemCaseSensitive(f, "pc"), &fr->pc) ||
			    get_hex(cJSON_GetObjectItemCaseSensitive(f, "sp"), &fr->sp))
				return bad(path, "\"stacktrace\" frame needs hex pc and sp");
			fr->symbol = dup_str(cJSON_GetObjectItemCaseSensitive(f, "symbol"));
			/* (absent before it was written: null) */
			fr->function = dup_str(cJSON_GetObjectItemCaseSensitive(f, "function"));
		}
	}
	return 0;
}

static int apply_fds(struct gb_snapshot *s, const cJSON *fds, const char *path)
{
	if (!cJSON_IsArray(fds))
		return bad(path, "\"fds\" is not an array");
	int n = cJSON_GetArraySize(fds);
	s->fds = n ? calloc((size_t)n, sizeof(*s->fds)) : NULL;
	if (n && !s->fds)
		return gb_fail(-ENOMEM, "%s: out of memory", path);
	const cJSON *o;
	cJSON_ArrayForEach(o, fds) {
		struct gb_snap_fd *f = &s->fds[s->nfds++];
		const cJSON *fd = cJSON_GetObjectItemCaseSensitive(o, "fd");
		const cJSON *off = cJSON_GetObjectItemCaseSensitive(o, "offset");
		uint64_t flags;
		if (!cJSON_IsNumber(fd) || !cJSON_IsNumber(off) ||
		    get_hex(cJSON_GetObjectItemCaseSensitive(o, "flags"), &flags))
			return bad(path, "\"fds\" entry needs fd, flags and offset");
		f->fd = (int)fd->valuedouble;
		f->flags = (uint32_t)flags;
		f->pos = (uint64_t)off->valuedouble;
		f->target = dup_str(cJSON_GetObjectItemCaseSensitive(o, "target"));
		const char *why = NULL;
		int e = gb_fdk_from_json(o, &f->k, &why);
		if (e == -EINVAL)
			return bad(path, why);
		if (e)
			return gb_fail(e, "%s: out of memory", path);
	}
	return 0;
}

int gb_snap__json_apply(struct gb_snapshot *s, const char *json, size_t len, const char *what,
			const char *file)
{
	char path[4200];
	int r;
	snprintf(path, sizeof(path), "%s%s%s", what ? what : "", what ? ": " : "", file);
	cJSON *root = cJSON_ParseWithLength(json, len);
	if (!root)
		return bad(path, "not valid JSON");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "version");
	if (!cJSON_IsNumber(v) || v->valuedouble != GB_SNAP_VERSION) {
		r = bad(path, "unknown \"version\" (this gebpf reads version 1)");
		goto cleanup;
	}
	r = apply_meta(s, cJSON_GetObjectItemCaseSensitive(root, "meta"), path);
	if (r)
		goto cleanup;
	s->exe = dup_str(cJSON_GetObjectItemCaseSensitive(root, "exe"));

	const cJSON *threads = cJSON_GetObjectItemCaseSensitive(root, "threads");
	if (!cJSON_IsArray(threads) || (size_t)cJSON_GetArraySize(threads) != s->nthreads) {
		r = bad(path, "\"threads\" does not list one entry per NT_PRSTATUS");
		goto cleanup;
	}
	for (size_t i = 0; i < s->nthreads; i++)
		gb_snap__json_tstate_apply(cJSON_GetArrayItem(threads, (int)i), &s->threads[i].ks);
	if (gb_snap__json_pstate_apply(cJSON_GetObjectItemCaseSensitive(root, "process"), &s->pk)) {
		r = gb_fail(-ENOMEM, "%s: out of memory", path);
		goto cleanup;
	}
	r = apply_maps(s, cJSON_GetObjectItemCaseSensitive(root, "maps"), path);
	if (r)
		goto cleanup;
	const cJSON *mem = cJSON_GetObjectItemCaseSensitive(root, "mem");
	if (!cJSON_IsArray(mem) || (size_t)cJSON_GetArraySize(mem) != s->nmaps) {
		r = bad(path, "\"mem\" does not list one entry per PT_LOAD");
		goto cleanup;
	}
	for (size_t i = 0; i < s->nmaps; i++) {
		const char *h = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
			cJSON_GetArrayItem(mem, (int)i), "sha256"));
		if (h && strlen(h) == 64)
			memcpy(s->maps[i].sha256, h, 65);
	}
	r = apply_stacks(s, cJSON_GetObjectItemCaseSensitive(root, "stacktrace"), path);
	if (r)
		goto cleanup;
	r = apply_fds(s, cJSON_GetObjectItemCaseSensitive(root, "fds"), path);
	if (r)
		goto cleanup;
	const cJSON *vars = cJSON_GetObjectItemCaseSensitive(root, "vars"), *kv;
	cJSON_ArrayForEach(kv, vars) {
		if (cJSON_IsString(kv) && (r = gb_snapshot_set_var(s, kv->string, kv->valuestring)))
			goto cleanup;
	}
	r = 0;
cleanup:
	cJSON_Delete(root);
	return r;
}
