#include "sym/syms.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrace/maps.h"

struct sym {
	uint64_t value, size;   /* file virtual address */
	char *name;
	bool global;
};

struct phdr_load {
	uint64_t vaddr, memsz, offset;
};

struct module {
	char path[4096];
	bool loaded, is_exe;
	struct sym *syms;
	size_t nsyms;
	struct phdr_load *loads;
	size_t nloads;
};

struct gb_syms {
	pid_t pid;
	struct gb_maps maps;
	struct module *mods;
	size_t nmods;
	char exe[4096];
};

static int cmp_sym(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;
	return x->value < y->value ? -1 : x->value > y->value;
}

static void load_symtab(struct module *m, Elf *e, Elf_Scn *scn, GElf_Shdr *sh)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	if (!d || !sh->sh_entsize)
		return;
	size_t n = sh->sh_size / sh->sh_entsize;
	struct sym *v = realloc(m->syms, (m->nsyms + n) * sizeof(*v));
	if (!v)
		return;
	m->syms = v;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym s;
		if (!gelf_getsym(d, (int)i, &s))
			continue;
		int type = GELF_ST_TYPE(s.st_info);
		if ((type != STT_FUNC && type != STT_OBJECT && type != STT_GNU_IFUNC &&
		     type != STT_NOTYPE) || s.st_shndx == SHN_UNDEF || !s.st_value)
			continue;
		const char *name = elf_strptr(e, sh->sh_link, s.st_name);
		if (!name || !*name)
			continue;
		if (type == STT_NOTYPE && s.st_size == 0 && GELF_ST_BIND(s.st_info) == STB_LOCAL)
			continue; /* local labels ($x, .L...) */
		struct sym *y = &m->syms[m->nsyms++];
		y->value = s.st_value;
		y->size = s.st_size;
		y->name = strdup(name);
		y->global = GELF_ST_BIND(s.st_info) != STB_LOCAL;
	}
}

static void module_load(struct module *m)
{
	if (m->loaded)
		return;
	m->loaded = true;
	int fd = open(m->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e) {
		close(fd);
		return;
	}
	size_t nph = 0;
	elf_getphdrnum(e, &nph);
	m->loads = calloc(nph ? nph : 1, sizeof(*m->loads));
	for (size_t i = 0; m->loads && i < nph; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD)
			m->loads[m->nloads++] = (struct phdr_load){ ph.p_vaddr, ph.p_memsz, ph.p_offset };
	}
	/* .symtab when present (static test programs, unstripped binaries),
	 * else .dynsym (stripped shared libraries). */
	Elf_Scn *scn = NULL, *dyn = NULL;
	bool have_symtab = false;
	GElf_Shdr sh, dynsh;
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB) {
			load_symtab(m, e, scn, &sh);
			have_symtab = true;
		} else if (sh.sh_type == SHT_DYNSYM) {
			dyn = scn;
			dynsh = sh;
		}
	}
	if (!have_symtab && dyn)
		load_symtab(m, e, dyn, &dynsh);
	qsort(m->syms, m->nsyms, sizeof(*m->syms), cmp_sym);
	elf_end(e);
	close(fd);
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
			seen = !strcmp(s->mods[j].path, p);
		if (seen)
			continue;
		struct module *m = &s->mods[s->nmods++];
		snprintf(m->path, sizeof(m->path), "%s", p);
		m->is_exe = !strcmp(p, s->exe);
	}
	return s;
}

void gb_syms__free(struct gb_syms *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nmods; i++) {
		for (size_t j = 0; j < s->mods[i].nsyms; j++)
			free(s->mods[i].syms[j].name);
		free(s->mods[i].syms);
		free(s->mods[i].loads);
	}
	free(s->mods);
	gb_maps_free(&s->maps);
	free(s);
}

/* File virtual address -> run-time address through the PT_LOAD holding it
 * and the mapping of that file offset.  0 when not mapped. */
static uint64_t to_runtime(const struct gb_syms *s, const struct module *m, uint64_t vaddr)
{
	for (size_t i = 0; i < m->nloads; i++) {
		const struct phdr_load *l = &m->loads[i];
		if (vaddr < l->vaddr || vaddr >= l->vaddr + l->memsz)
			continue;
		uint64_t off = vaddr - l->vaddr + l->offset;
		for (size_t k = 0; k < s->maps.n; k++) {
			const struct gb_map *mp = &s->maps.v[k];
			if (strcmp(mp->path, m->path))
				continue;
			if (off >= mp->offset && off < mp->offset + (mp->end - mp->start))
				return mp->start + (off - mp->offset);
		}
	}
	return 0;
}

static bool module_matches(const struct module *m, const char *want)
{
	if (!*want)
		return true;
	if (!strcmp(m->path, want))
		return true;
	const char *base = strrchr(m->path, '/');
	base = base ? base + 1 : m->path;
	size_t l = strlen(want);
	return !strcmp(base, want) ||
	       (!strncmp(base, want, l) && (base[l] == '.' || base[l] == '-'));
}

int gb_syms__resolve(struct gb_syms *s, const char *module, const char *name,
		     uint64_t *start, uint64_t *end, char *err, size_t errlen)
{
	bool any_module = false;
	/* Two passes: the main executable first, then the others in map order. */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < s->nmods; i++) {
			struct module *m = &s->mods[i];
			if (m->is_exe != (pass == 0) || !module_matches(m, module))
				continue;
			any_module = true;
			module_load(m);
			const struct sym *best = NULL;
			for (size_t j = 0; j < m->nsyms; j++)
				if (!strcmp(m->syms[j].name, name) &&
				    (!best || (m->syms[j].global && !best->global)))
					best = &m->syms[j];
			if (!best)
				continue;
			uint64_t a = to_runtime(s, m, best->value);
			if (!a) {
				snprintf(err, errlen, "symbol %s in %s is not mapped", name, m->path);
				return -ENOENT;
			}
			if (!best->size) {
				snprintf(err, errlen, "symbol %s in %s has no size; give a START-END range",
					 name, m->path);
				return -EINVAL;
			}
			*start = a;
			*end = a + best->size - 1;
			return 0;
		}
	}
	if (*module && !any_module)
		snprintf(err, errlen, "no mapped module matches '%s'", module);
	else
		snprintf(err, errlen, "symbol '%s' not found in %s", name,
			 *module ? module : "any mapped module");
	return -ENOENT;
}

int gb_syms__lookup(struct gb_syms *s, uint64_t addr, char *name, size_t len, uint64_t *off)
{
	const struct gb_map *mp = gb_maps_find(&s->maps, addr);
	if (!mp || mp->path[0] != '/') {
		snprintf(name, len, "%s", mp && mp->path[0] ? mp->path : "??");
		*off = mp ? addr - mp->start : addr;
		return -ENOENT;
	}
	struct module *m = NULL;
	for (size_t i = 0; i < s->nmods && !m; i++)
		if (!strcmp(s->mods[i].path, mp->path))
			m = &s->mods[i];
	const char *base = strrchr(mp->path, '/') + 1;
	if (m) {
		module_load(m);
		/* Run-time -> file vaddr through the mapping and the PT_LOADs. */
		uint64_t foff = addr - mp->start + mp->offset;
		for (size_t i = 0; i < m->nloads; i++) {
			const struct phdr_load *l = &m->loads[i];
			if (foff < l->offset || foff >= l->offset + l->memsz)
				continue;
			uint64_t va = foff - l->offset + l->vaddr;
			/* Last symbol whose value <= va (binary search). */
			size_t lo = 0, hi = m->nsyms;
			while (lo < hi) {
				size_t mid = (lo + hi) / 2;
				if (m->syms[mid].value <= va)
					lo = mid + 1;
				else
					hi = mid;
			}
			for (size_t j = lo; j-- > 0;) {
				const struct sym *y = &m->syms[j];
				if (va < y->value + (y->size ? y->size : 1) || (!y->size && j + 1 == lo)) {
					snprintf(name, len, "%s", y->name);
					*off = va - y->value;
					return 0;
				}
				if (y->size)
					break;
			}
			break;
		}
	}
	snprintf(name, len, "%s", base);
	*off = addr - mp->start + mp->offset;
	return -ENOENT;
}

int gb_sym_resolve(pid_t pid, const char *module, const char *name, uint64_t *start,
		   uint64_t *end, char *err, size_t errlen)
{
	struct gb_syms *s = gb_syms__new(pid);
	if (!s) {
		snprintf(err, errlen, "cannot read the maps of pid %d: %s", pid, strerror(errno));
		return -errno;
	}
	int r = gb_syms__resolve(s, module, name, start, end, err, errlen);
	gb_syms__free(s);
	return r;
}

