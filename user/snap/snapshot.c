/* The snapshot as a value: lifecycle and queries (vtrace's
 * platformReadMemory / platformWriteMemory / platformGetRegCtx). */
#include "snap/snapshot.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/bound.h"
#include "common/grow.h"
#include "snap/fdkind.h"
#include "common/log.h"
#include "snap/source.h"

struct gb_snapshot *gb_snapshot_alloc(void)
{
	struct gb_snapshot *s = calloc(1, sizeof(*s));
	if (s)
		s->meta.vt = -1;
	return s;
}

void gb_snapshot_free(struct gb_snapshot *s)
{
	if (!s)
		return;
	free(s->meta.point);
	free(s->meta.kernel);
	free(s->meta.arch);
	free(s->meta.platform);
	free(s->exe);
	free(s->pk.cwd);
	for (size_t i = 0; i < s->nthreads; i++) {
		struct gb_snap_thread *t = &s->threads[i];
		free(t->xstate);
		for (size_t j = 0; j < t->nframes; j++) {
			free(t->frames[j].symbol);
			free(t->frames[j].function);
		}
		free(t->frames);
	}
	free(s->threads);
	for (size_t i = 0; i < s->nmaps; i++) {
		struct gb_snap_map *m = &s->maps[i];
		if (s->owns_map_data && m->data)
			munmap(m->data, m->end - m->start);
		free(m->path);
	}
	free(s->maps);
	for (size_t i = 0; i < s->nfds; i++) {
		free(s->fds[i].target);
		gb_fdk_free(s->fds[i].k);
	}
	free(s->fds);
	free(s->auxv);
	for (size_t i = 0; i < s->nvars; i++) {
		free(s->vars[i].key);
		free(s->vars[i].value);
	}
	free(s->vars);
	if (s->file_base)
		munmap(s->file_base, s->file_len);
	gb_snap_src__free(s->src);
	free(s);
}

const struct gb_snap_map *gb_snapshot_find_map(const struct gb_snapshot *s, uint64_t addr)
{
	size_t i = GB_UPPER(s->maps, s->nmaps, start, addr);
	return i && addr < s->maps[i - 1].end ? &s->maps[i - 1] : NULL;
}

/* Read [a, a + n) of a live map (within it) through whole pages. */
static int read_live(const struct gb_snapshot *s, const struct gb_snap_map *m, uint64_t a, void *out,
		     size_t n)
{
	uint8_t page[GB_PAGE_SIZE];
	uint64_t failed = 0;
	while (n) {
		uint64_t p = (a - m->start) & ~(GB_PAGE_SIZE - 1), in = (a - m->start) - p;
		size_t k = GB_PAGE_SIZE - in < n ? (size_t)(GB_PAGE_SIZE - in) : n;
		bool holes;
		int64_t r = gb_snap_src__read(s->src, m, p, page, GB_PAGE_SIZE, &holes, &failed);
		if (r < 0)
			return (int)r;
		if (holes)
			memset(out, 0, k);
		else
			memcpy(out, page + in, k);
		out = (uint8_t *)out + k;
		a += k;
		n -= k;
	}
	return 0;
}

/* A loaded core is mapped read-only: make the pages of [p, p + n) of it
 * writable (private copies) before they are changed. */
static int make_writable(const struct gb_snapshot *s, uint8_t *p, size_t n)
{
	if (!s->file_base || p < (uint8_t *)s->file_base || p >= (uint8_t *)s->file_base + s->file_len)
		return 0;
	uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(GB_PAGE_SIZE - 1);
	uintptr_t hi = ((uintptr_t)p + n + GB_PAGE_SIZE - 1) & ~(uintptr_t)(GB_PAGE_SIZE - 1);
	return mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE) ? -errno : 0;
}

/* "gebpf: WHAT: <fmt>" when what is not NULL; returns e. */
static int mem_fail(const char *what, int e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int mem_fail(const char *what, int e, const char *fmt, ...)
{
	char why[512];
	va_list ap;
	if (!what)
		return e;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return gb_fail(e, "%s: %s", what, why);
}

/* Walk [addr, addr+len) map by map; copy out (buf) or in (src). */
static int access_mem(const struct gb_snapshot *s, uint64_t addr, void *buf, const void *src,
		      size_t len, const char *what)
{
	if (len && addr + len - 1 < addr)
		return mem_fail(what, -EFAULT, "0x%" PRIx64 "+%zu: wraps around the address space",
			    addr, len);
	size_t done = 0;
	while (done < len) {
		uint64_t a = addr + done;
		const struct gb_snap_map *m = gb_snapshot_find_map(s, a);
		if (!m)
			return mem_fail(what, -EFAULT, "0x%" PRIx64 ": not in any mapping of the snapshot", a);
		if (!gb_snap_map_has_bytes(m))
			return mem_fail(what, -ENODATA,
				    "0x%" PRIx64 ": mapping 0x%" PRIx64 "-0x%" PRIx64 " %s%s%s has no bytes "
				    "(it was not readable)", a, m->start, m->end, m->perms,
				    m->path && *m->path ? " " : "", m->path ? m->path : "");
		size_t n = (size_t)(m->end - a);
		if (n > len - done)
			n = len - done;
		int r = 0;
		if (buf && m->data)
			memcpy((char *)buf + done, m->data + (a - m->start), n);
		else if (buf)
			r = read_live(s, m, a, (char *)buf + done, n);
		else if (m->data && !(r = make_writable(s, m->data + (a - m->start), n)))
			memcpy(m->data + (a - m->start), (const char *)src + done, n);
		else if (!m->data)
			r = -EROFS;
		if (r)
			return mem_fail(what, r, "0x%" PRIx64 ": %s", a,
				    r == -EROFS ? "the bytes are still in the process (save first)" :
				    strerror(-r));
		done += n;
	}
	return 0;
}

int gb_snapshot_read_memory(const struct gb_snapshot *s, uint64_t addr, void *buf, size_t len,
			    const char *what)
{
	return access_mem(s, addr, buf, NULL, len, what);
}

int gb_snapshot_write_memory(struct gb_snapshot *s, uint64_t addr, const void *buf, size_t len,
			     const char *what)
{
	/* Check the whole range first so a failed write changes nothing. */
	for (uint64_t a = addr; a < addr + len;) {
		const struct gb_snap_map *m = gb_snapshot_find_map(s, a);
		if (!m || !gb_snap_map_has_bytes(m))
			return access_mem(s, a, NULL, buf, (size_t)(addr + len - a), what);
		a = m->end;
	}
	return access_mem(s, addr, NULL, buf, len, what);
}

const struct user_regs_struct *gb_snapshot_regs(const struct gb_snapshot *s, size_t i)
{
	return i < s->nthreads ? &s->threads[i].regs : NULL;
}

int gb_snapshot_set_var(struct gb_snapshot *s, const char *key, const char *value)
{
	for (size_t i = 0; i < s->nvars; i++)
		if (!strcmp(s->vars[i].key, key)) {
			char *v = strdup(value);
			if (!v)
				return -ENOMEM;
			free(s->vars[i].value);
			s->vars[i].value = v;
			return 0;
		}
	if (GB_GROW(&s->vars, &s->vars_cap, s->nvars + 1))
		return -ENOMEM;
	struct gb_snap_var *nv = s->vars;
	nv[s->nvars].key = strdup(key);
	nv[s->nvars].value = strdup(value);
	if (!nv[s->nvars].key || !nv[s->nvars].value) {
		free(nv[s->nvars].key);
		free(nv[s->nvars].value);
		return -ENOMEM;
	}
	s->nvars++;
	return 0;
}

pid_t gb_snapshot_source_pid(const struct gb_snapshot *s)
{
	return gb_snap_src__child(s->src);
}
