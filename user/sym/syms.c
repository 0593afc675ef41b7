#include "sym/syms.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "ptrace/maps.h"
#include "ptrace/mem.h"
#include "sym/debugfile.h"
#include "sym/elfsyms.h"
#include "sym/gotslots.h"

struct module {
	char path[4096 + 64];     /* the file, as gebpf opens it (in a target with
				   * another root: through /proc/PID/root) */
	char mpath[4096];         /* ... as the target's maps name it */
	bool loaded, is_exe;
	bool headers;             /* es holds its program headers only */
	struct gb_elfsyms es;
};

struct gb_syms {
	pid_t pid;
	char root[64];            /* "/proc/PID/root" when its root is not gebpf's, else "" */
	struct gb_maps maps;
	struct module *mods;
	size_t nmods;
	char exe[4096];
};

static void module_load(struct module *m)
{
	if (m->loaded)
		return;
	m->loaded = true;
	gb_elfsyms_free(&m->es); /* (its headers only) */
	if (gb_elfsyms_load(m->path, &m->es))
		gb_elfsyms_free(&m->es);   /* unreadable: no symbols */
}

/* Its program headers, enough for offsets and addresses: a whole symbol
 * table (libc's debug file) takes tens of ms to read. */
static void module_headers(struct module *m)
{
	if (m->loaded || m->headers)
		return;
	m->headers = true;
	if (gb_elfsyms_load_headers(m->path, &m->es))
		gb_elfsyms_free(&m->es);
}

struct gb_syms *gb_syms__new(pid_t pid)
{
	struct gb_syms *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->pid = pid;
	int r = gb_maps_read(pid, &s->maps);
	if (r) {
		free(s);
		errno = -r;
		return NULL;
	}
	/* A target in a container or a chroot names its files from its own
	 * root: they are opened through /proc/PID/root (the paths its maps
	 * give are its own, and the same path here may be another file). */
	struct stat rs, ours;
	snprintf(s->root, sizeof(s->root), "/proc/%d/root", pid);
	if (stat(s->root, &rs) || stat("/", &ours) || (rs.st_dev == ours.st_dev && rs.st_ino == ours.st_ino))
		s->root[0] = 0;
	char link[64];
	snprintf(link, sizeof(link), "/proc/%d/exe", pid);
	ssize_t n = readlink(link, s->exe, sizeof(s->exe) - 1);
	s->exe[n > 0 ? n : 0] = 0;
	s->mods = calloc(s->maps.n ? s->maps.n : 1, sizeof(*s->mods));
	for (size_t i = 0; s->mods && i < s->maps.n; i++) {
		const char *p = s->maps.v[i].path;
		if (p[0] != '/')
			continue;
		bool seen = false;
		for (size_t j = 0; j < s->nmods && !seen; j++)
			seen = !strcmp(s->mods[j].mpath, p);
		if (seen)
			continue;
		struct module *m = &s->mods[s->nmods++];
		snprintf(m->mpath, sizeof(m->mpath), "%s", p);
		snprintf(m->path, sizeof(m->path), "%s%s", s->root, p);
		m->is_exe = !strcmp(p, s->exe);
	}
	return s;
}

void gb_syms__free(struct gb_syms *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nmods; i++)
		gb_elfsyms_free(&s->mods[i].es);
	free(s->mods);
	gb_maps_free(&s->maps);
	free(s);
}

/* File virtual address -> run-time address through the PT_LOAD holding it
 * and the mapping of that file offset.  0 when not mapped. */
static uint64_t to_runtime(const struct gb_syms *s, const struct module *m, uint64_t vaddr)
{
	for (size_t i = 0; i < m->es.nloads; i++) {
		const struct gb_elfload *l = &m->es.loads[i];
		if (vaddr < l->vaddr || vaddr >= l->vaddr + l->memsz)
			continue;
		uint64_t off = vaddr - l->vaddr + l->offset;
		for (size_t k = 0; k < s->maps.n; k++) {
			const struct gb_map *mp = &s->maps.v[k];
			if (strcmp(mp->path, m->mpath))
				continue;
			if (off >= mp->offset && off < mp->offset + (mp->end - mp->start))
				return mp->start + (off - mp->offset);
		}
	}
	return 0;
}

/* The module's file mapped at run-time address a (executable mapping):
 * a's link-time address in it.  -ENOENT when a is not its code. */
static int to_vaddr(const struct gb_syms *s, const struct module *m, uint64_t a, uint64_t *va)
{
	const struct gb_map *mp = gb_maps_find(&s->maps, a);
	if (!mp || strcmp(mp->path, m->mpath) || !(mp->prot & PROT_EXEC))
		return -ENOENT;
	return gb_elfsyms_to_vaddr(&m->es, a - mp->start + mp->offset, va);
}

/* The implementation the IFUNC y of module m resolved to in the process:
 * the value the loader wrote into a GOT slot for it (sym/gotslots.h), in
 * m's own relocations first, then in any module's.  Its link-time address
 * in m, or -EAGAIN when no slot is bound yet. */
static int ifunc_target(struct gb_syms *s, struct module *m, const struct gb_elfsym *y,
			uint64_t *va)
{
	uint64_t resolver = to_runtime(s, m, y->value);
	struct gb_gotslots own = { 0 };
	if (gb_gotslots_find(m->path, 0, NULL, &own))
		return -EAGAIN;
	for (size_t i = 0; i < s->nmods; i++) {
		struct module *o = &s->mods[i];
		struct gb_gotslots g = { 0 };
		if (gb_gotslots_find(o->path, o == m ? y->value : 0, y->name, &g))
			continue;
		if (g.n)
			module_load(o);
		for (size_t k = 0; k < g.n; k++) {
			uint64_t slot = to_runtime(s, o, g.v[k]), val = 0;
			/* unrelocated (or lazily unbound: the slot points at o's
			 * PLT) slots hold no address of m's code */
			if (!slot || gb_mem_read(s->pid, slot, &val, sizeof(val)) != sizeof(val) ||
			    val == resolver || to_vaddr(s, m, val, va) || gb_gotslots_in_plt(&own, *va))
				continue;
			gb_gotslots_free(&g);
			gb_gotslots_free(&own);
			return 0;
		}
		gb_gotslots_free(&g);
	}
	gb_gotslots_free(&own);
	return -EAGAIN;
}

/* For an IFUNC best of m: the symbol of the implementation the process
 * uses (what gdb's "break strlen" stops in).  0, or -errno with the reason
 * said when what is not NULL. */
static int resolve_ifunc(struct gb_syms *s, struct module *m, const struct gb_elfsym **best,
			 const char *what)
{
	const struct gb_elfsym *y = *best, *impl;
	uint64_t va, off;
	char hint[PATH_MAX + 200];
	int r = ifunc_target(s, m, y, &va);
	if (r) {
		if (what)
			gb_err("%s: symbol %s in %s is an IFUNC the dynamic loader has not bound yet "
			       "in this process; name the implementation or give START-END",
			       what, y->name, m->path);
		return r;
	}
	impl = gb_elfsyms_at(&m->es, va, &off);
	if (!impl || off || !impl->size || impl->ifunc) {
		if (what && m->es.no_symtab) {
			gb_debugfile_hint(m->path, hint, sizeof(hint));
			gb_err("%s: symbol %s in %s is an IFUNC; the process uses the code at "
			       "0x%llx, which only the full symbol table names: install %s",
			       what, y->name, m->path, (unsigned long long)va, hint);
		} else if (what) {
			gb_err("%s: symbol %s in %s is an IFUNC; the process uses the code at 0x%llx, "
			       "which no sized symbol starts at; give START-END",
			       what, y->name, m->path, (unsigned long long)va);
		}
		return -EINVAL;
	}
	gb_info("symbol %s in %s is an IFUNC; pid %d uses %s (0x%llx)", y->name, m->path, s->pid,
		impl->name, (unsigned long long)to_runtime(s, m, impl->value));
	*best = impl;
	return 0;
}

/* The end of the "not found" line: what to install when name may be in
 * the full symbol table of a matching module that has only its dynamic
 * symbols. */
static void not_found_hint(struct gb_syms *s, const char *module, char *buf, size_t len)
{
	buf[0] = 0;
	for (size_t i = 0; i < s->nmods; i++) {
		struct module *m = &s->mods[i];
		if (!gb_module_matches(m->path, module) || !m->loaded || !m->es.no_symtab ||
		    !*module)
			continue;
		char hint[PATH_MAX + 200];
		gb_debugfile_hint(m->path, hint, sizeof(hint));
		snprintf(buf, len, " (%s has no .symtab, only its dynamic symbols: install %s)",
			 m->path, hint);
		return;
	}
}

int gb_syms__resolve(struct gb_syms *s, const char *module, const char *name,
		     uint64_t *start, uint64_t *end, const char *what)
{
	bool any_module = false;
	/* Two passes: the main executable first, then the others in map order. */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < s->nmods; i++) {
			struct module *m = &s->mods[i];
			if (m->is_exe != (pass == 0) || !gb_module_matches(m->path, module))
				continue;
			any_module = true;
			module_load(m);
			size_t overloads;
			const struct gb_elfsym *best = gb_elfsyms_find_ex(&m->es, name, &overloads);
			if (!best && overloads > 1) {
				char list[512];
				gb_elfsyms_overloads(&m->es, name, list, sizeof(list));
				if (what)
					gb_err("%s: '%s' names %zu functions in %s (overloads): give one "
					       "with its parameter list, as gdb shows it: %s", what, name,
					       overloads, m->path, list);
				return -EINVAL;
			}
			if (!best)
				continue;
			int r = best->ifunc ? resolve_ifunc(s, m, &best, what) : 0;
			if (r)
				return r;
			uint64_t lo, hi, a = to_runtime(s, m, best->value);
			if (!a) {
				if (what)
					gb_err("%s: symbol %s in %s is not mapped", what, name, m->path);
				return -ENOENT;
			}
			if (gb_elfsym_range(best, &lo, &hi)) {
				if (what)
					gb_err("%s: symbol %s in %s %s", what, name, m->path,
					       gb_elfsym_unusable(best));
				return -EINVAL;
			}
			*start = a;
			*end = a + (hi - lo);
			return 0;
		}
	}
	if (!what)
		return -ENOENT;
	char hint[3 * PATH_MAX];
	not_found_hint(s, module, hint, sizeof(hint));
	if (*module && !any_module)
		gb_err("%s: no mapped module matches '%s'", what, module);
	else
		gb_err("%s: symbol '%s' not found in %s%s", what, name,
		       *module ? module : "any mapped module", hint);
	return -ENOENT;
}

/* The symbol containing addr (*off into it) and the mapping of addr
 * (*mp, NULL when none), or NULL. */
static const struct gb_elfsym *sym_at(struct gb_syms *s, uint64_t addr, const struct gb_map **mp,
				      uint64_t *off)
{
	*mp = gb_maps_find(&s->maps, addr);
	if (!*mp || (*mp)->path[0] != '/')
		return NULL;
	for (size_t i = 0; i < s->nmods; i++) {
		struct module *m = &s->mods[i];
		if (strcmp(m->mpath, (*mp)->path))
			continue;
		module_load(m);
		/* Run-time -> file vaddr through the mapping and the PT_LOADs. */
		uint64_t va;
		if (gb_elfsyms_to_vaddr(&m->es, addr - (*mp)->start + (*mp)->offset, &va))
			return NULL;
		return gb_elfsyms_at(&m->es, va, off);
	}
	return NULL;
}

int gb_syms__lookup(struct gb_syms *s, uint64_t addr, char *name, size_t len, uint64_t *off)
{
	const struct gb_map *mp;
	const struct gb_elfsym *y = sym_at(s, addr, &mp, off);
	if (y) {
		snprintf(name, len, "%s", y->name);
		return 0;
	}
	if (!mp || mp->path[0] != '/') {
		snprintf(name, len, "%s", mp && mp->path[0] ? mp->path : "??");
		*off = mp ? addr - mp->start : addr;
		return -ENOENT;
	}
	snprintf(name, len, "%s", strrchr(mp->path, '/') + 1);
	*off = addr - mp->start + mp->offset;
	return -ENOENT;
}

int gb_syms__func_at(struct gb_syms *s, uint64_t addr, char *name, size_t len, uint64_t *start,
		     uint64_t *size)
{
	const struct gb_map *mp;
	uint64_t off;
	const struct gb_elfsym *y = sym_at(s, addr, &mp, &off);
	if (!y || !y->func || !y->size || off >= y->size)
		return -ENOENT;
	snprintf(name, len, "%s", y->name);
	*start = addr - off;
	*size = y->size;
	return 0;
}

int gb_syms__to_file(struct gb_syms *s, uint64_t addr, char *path, size_t len,
		     uint64_t *vaddr, uint64_t *offset)
{
	const struct gb_map *mp = gb_maps_find(&s->maps, addr);
	if (!mp || mp->path[0] != '/')
		return -ENOENT;
	for (size_t i = 0; i < s->nmods; i++) {
		struct module *m = &s->mods[i];
		if (strcmp(m->mpath, mp->path))
			continue;
		module_headers(m);
		uint64_t off = addr - mp->start + mp->offset;
		if (gb_elfsyms_to_vaddr(&m->es, off, vaddr))
			return -ENOENT;
		snprintf(path, len, "%s", m->path);
		*offset = off;
		return 0;
	}
	return -ENOENT;
}

int gb_sym_range_resolve(const struct gb_range_spec *spec, pid_t pid, struct gb_range_spec *out,
			 const char *what)
{
	*out = *spec;
	if (spec->kind != GB_RANGE_SYM)
		return 0;
	char in_pid[600];
	if (what)
		snprintf(in_pid, sizeof(in_pid), "%s: pid %d", what, pid);
	struct gb_syms *s = gb_syms__new(pid);
	if (!s) {
		int r = -errno;
		if (what)
			gb_err("%s: cannot read its maps: %s", in_pid, strerror(-r));
		return r;
	}
	uint64_t start, end;
	int r = gb_syms__resolve(s, spec->module, spec->symbol, &start, &end, what ? in_pid : NULL);
	gb_syms__free(s);
	if (r)
		return r;
	out->kind = GB_RANGE_ADDR;
	out->has_start = out->has_end = true;
	out->start = start;
	out->end = end;
	return 0;
}

