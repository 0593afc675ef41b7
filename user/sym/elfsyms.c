#include "sym/elfsyms.h"

#include <errno.h>
#include <fcntl.h>
#include <elfutils/libdwfl.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/bound.h"
#include "common/grow.h"
#include "sym/debugfile.h"
#include "sym/demangle.h"

/* By address; at one address as libdwfl's dwfl_module_addrinfo prefers
 * (the sampler's names, unwind/): globals, weak ones, locals, each in
 * table order. */
static int cmp_sym(const void *a, const void *b)
{
	const struct gb_elfsym *x = a, *y = b;
	if (x->value != y->value)
		return x->value < y->value ? -1 : 1;
	int rx = x->global ? 2 - x->weak : 0, ry = y->global ? 2 - y->weak : 0;
	if (rx != ry)
		return rx > ry ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* One symbol from libdwfl's table (value = link-time address: the module
 * is reported at bias 0), filtered as a range resolver needs. */
static int add_sym(struct gb_elfsyms *m, const char *name, const GElf_Sym *s, GElf_Addr value,
		   uint32_t order)
{
	int type = GELF_ST_TYPE(s->st_info);
	if ((type != STT_FUNC && type != STT_OBJECT && type != STT_GNU_IFUNC &&
	     type != STT_NOTYPE) || s->st_shndx == SHN_UNDEF || !value || !name || !*name)
		return 0;
	if (type == STT_NOTYPE && s->st_size == 0 && GELF_ST_BIND(s->st_info) == STB_LOCAL)
		return 0; /* local labels ($x, .L...) */
	if (GB_GROW(&m->syms, &m->syms_cap, m->nsyms + 1))
		return -ENOMEM;
	char *copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	m->syms[m->nsyms++] = (struct gb_elfsym){
		.value = value, .size = s->st_size, .name = copy,
		.global = GELF_ST_BIND(s->st_info) != STB_LOCAL,
		.weak = GELF_ST_BIND(s->st_info) == STB_WEAK,
		.func = type == STT_FUNC || type == STT_GNU_IFUNC,
		.ifunc = type == STT_GNU_IFUNC, .order = order,
	};
	return 0;
}

static bool has_symtab(Elf *e)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(e, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB)
			return true;
	return false;
}

/* The symbols, through libdwfl (the sampler's reader too, unwind/): the
 * file's .symtab, else the one of its separate debug file (debugfile.h),
 * else .dynsym and the .gnu_debugdata mini debug info. */
static int read_syms(struct gb_elfsyms *m, const char *path)
{
	Dwfl *d = dwfl_begin(&gb_debugfile_callbacks);
	if (!d)
		return -ENOMEM;
	int err = 0;
	dwfl_report_begin(d);
	Dwfl_Module *mod = dwfl_report_elf(d, path, path, -1, 0, true);
	dwfl_report_end(d, NULL, NULL);
	int n = mod ? dwfl_module_getsymtab(mod) : -1;
	for (int i = 1; i < n && !err; i++) {
		GElf_Sym s;
		GElf_Addr value;
		const char *name = dwfl_module_getsym_info(mod, i, &s, &value, NULL, NULL, NULL);
		err = add_sym(m, name, &s, value, (uint32_t)i);
	}
	const char *debug = NULL;
	if (mod)
		dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, &debug);
	m->no_symtab = m->no_symtab && !debug;
	dwfl_end(d);
	return err;
}

static int read_headers(Elf *e, struct gb_elfsyms *m)
{
	memset(m, 0, sizeof(*m));
	size_t nph = 0;
	if (elf_getphdrnum(e, &nph))
		return -ENOEXEC;
	m->loads = calloc(nph ? nph : 1, sizeof(*m->loads));
	if (!m->loads)
		return -ENOMEM;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD)
			m->loads[m->nloads++] = (struct gb_elfload){
				ph.p_vaddr, ph.p_memsz, ph.p_offset, ph.p_filesz, ph.p_flags };
	}
	return 0;
}

int gb_elfsyms_read(Elf *e, const char *path, struct gb_elfsyms *m)
{
	int err = read_headers(e, m);
	if (err)
		return err;
	m->no_symtab = !has_symtab(e);
	err = read_syms(m, path);
	if (m->syms)
		qsort(m->syms, m->nsyms, sizeof(*m->syms), cmp_sym);
	return err;
}

static int load(const char *path, struct gb_elfsyms *out, bool headers)
{
	memset(out, 0, sizeof(*out));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	int err = -ENOEXEC;
	if (e && elf_kind(e) == ELF_K_ELF)
		err = headers ? read_headers(e, out) : gb_elfsyms_read(e, path, out);
	elf_end(e);
	close(fd);
	return err;
}

int gb_elfsyms_load(const char *path, struct gb_elfsyms *out) { return load(path, out, false); }

int gb_elfsyms_load_headers(const char *path, struct gb_elfsyms *out)
{
	return load(path, out, true);
}

void gb_elfsyms_free(struct gb_elfsyms *s)
{
	for (size_t j = 0; j < s->nsyms; j++)
		free(s->syms[j].name);
	free(s->syms);
	free(s->loads);
	memset(s, 0, sizeof(*s));
}

/* Does the demangled d name want (as gdb takes a name: the whole of it,
 * or without its parameter list when want has none)?  2 whole, 1 without
 * the parameters, 0 not. */
static int demangled_match(const char *d, const char *want)
{
	size_t n = strlen(want), ld = strlen(d);
	/* (a template's instance starts with its return type: "long
	 * app::twice<long>(long)") */
	if (!strcmp(d, want) || (ld > n && d[ld - n - 1] == ' ' && !strcmp(d + ld - n, want)))
		return 2;
	if (strchr(want, '('))
		return 0;
	for (const char *k = strstr(d, want); k; k = strstr(k + 1, want))
		if ((k == d || k[-1] == ' ') && k[n] == '(')
			return 1;
	return 0;
}

/* By the demangled form (C++, Rust: sym/demangle.h): the function whose
 * whole demangled name is want, else the one whose name without its
 * parameters is, when only one is (*overloads: how many were). */
static const struct gb_elfsym *find_demangled(const struct gb_elfsyms *s, const char *want,
					      size_t *overloads)
{
	const struct gb_elfsym *best = NULL;
	int best_m = 0;
	char *buf = NULL;
	size_t cap = 0, n1 = 0;
	uint64_t v1 = 0;
	for (size_t j = 0; j < s->nsyms; j++) {
		const char *nm = s->syms[j].name;
		const char *d = gb_demangle(nm, &buf, &cap); /* (nm itself: not mangled) */
		int m = d == nm ? 0 : demangled_match(d, want);
		if (m == 1 && (!n1 || s->syms[j].value != v1)) { /* (aliases: one function) */
			n1++;
			v1 = s->syms[j].value;
		}
		if (m > best_m || (m && m == best_m && s->syms[j].global && !best->global)) {
			best = &s->syms[j];
			best_m = m;
		}
	}
	free(buf);
	*overloads = best_m == 1 ? n1 : 1;
	return best_m == 1 && n1 > 1 ? NULL : best;
}

void gb_elfsyms_overloads(const struct gb_elfsyms *s, const char *want, char *out, size_t len)
{
	char *buf = NULL;
	size_t cap = 0, used = 0;
	uint64_t last = 0;
	out[0] = 0;
	for (size_t j = 0; j < s->nsyms && used + 1 < len; j++) {
		const char *nm = s->syms[j].name;
		if (used && s->syms[j].value == last)
			continue;
		const char *d = gb_demangle(nm, &buf, &cap);
		if (d == nm || demangled_match(d, want) != 1)
			continue;
		int k = snprintf(out + used, len - used, "%s'%s'", used ? ", " : "", d);
		used = k < 0 || (size_t)k >= len - used ? len - 1 : used + (size_t)k;
		last = s->syms[j].value;
	}
	free(buf);
}

const struct gb_elfsym *gb_elfsyms_find(const struct gb_elfsyms *s, const char *name)
{
	size_t overloads;
	return gb_elfsyms_find_ex(s, name, &overloads);
}

const struct gb_elfsym *gb_elfsyms_find_ex(const struct gb_elfsyms *s, const char *name,
					   size_t *overloads)
{
	const struct gb_elfsym *best = NULL;
	*overloads = 0;
	for (size_t j = 0; j < s->nsyms; j++)
		if (!strcmp(s->syms[j].name, name) && (!best || (s->syms[j].global && !best->global)))
			best = &s->syms[j];
	/* (a C++ function of the global namespace too, as gdb takes it: `f`
	 * for f(long)) */
	if (!best)
		best = find_demangled(s, name, overloads);
	return best;
}

const char *gb_elfsym_unusable(const struct gb_elfsym *y)
{
	if (y->ifunc)
		return "is an IFUNC: its code is the resolver that picks an implementation at load "
		       "time; name the implementation or give START-END";
	if (!y->size)
		return "has no size; give a START-END range";
	return NULL;
}

int gb_elfsym_range(const struct gb_elfsym *y, uint64_t *lo, uint64_t *hi)
{
	if (gb_elfsym_unusable(y))
		return -EINVAL;
	*lo = y->value;
	*hi = y->value + y->size - 1;
	return 0;
}

const struct gb_elfsym *gb_elfsyms_at(const struct gb_elfsyms *s, uint64_t va, uint64_t *off)
{
	/* Last symbol whose value <= va (binary search), then back over
	 * sized symbols that end before va. */
	size_t lo = GB_UPPER(s->syms, s->nsyms, value, va);
	for (size_t j = lo; j-- > 0;) {
		const struct gb_elfsym *y = &s->syms[j];
		if (va < y->value + (y->size ? y->size : 1) || (!y->size && j + 1 == lo)) {
			/* the first of the names at that address (cmp_sym) */
			while (j > 0 && s->syms[j - 1].value == y->value &&
			       (va < y->value + s->syms[j - 1].size || !y->size))
				y = &s->syms[--j];
			*off = va - y->value;
			return y;
		}
		if (y->size)
			break;
	}
	return NULL;
}

int gb_elfsyms_to_offset(const struct gb_elfsyms *s, uint64_t vaddr, uint64_t *off)
{
	for (size_t i = 0; i < s->nloads; i++) {
		const struct gb_elfload *l = &s->loads[i];
		if (vaddr >= l->vaddr && vaddr < l->vaddr + l->filesz) {
			*off = vaddr - l->vaddr + l->offset;
			return 0;
		}
	}
	return -ENOENT;
}

int gb_elfsyms_to_vaddr(const struct gb_elfsyms *s, uint64_t off, uint64_t *vaddr)
{
	for (size_t i = 0; i < s->nloads; i++) {
		const struct gb_elfload *l = &s->loads[i];
		if (off >= l->offset && off < l->offset + l->filesz) {
			*vaddr = off - l->offset + l->vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

bool gb_module_matches(const char *path, const char *want)
{
	if (!*want || !strcmp(path, want))
		return true;
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	size_t l = strlen(want);
	return !strcmp(base, want) ||
	       (!strncmp(base, want, l) && (base[l] == '.' || base[l] == '-'));
}
