#include "sym/modfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <glob.h>
#include <libelf.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/grow.h"
#include "common/log.h"
#include "sym/elfsyms.h"

struct search {
	const char *module, *name;
	char **seen;             /* realpaths already tried */
	size_t nseen, seen_cap;
	bool found_file;         /* some x86-64 ELF file matched the module */
	int unusable;            /* ... and defined name unusably (-EINVAL) */
	char why[PATH_MAX + 512]; /* the first such reason */
	char *path;
	size_t pathlen;
	uint64_t lo, hi;
};

static bool seen_before(struct search *s, const char *file)
{
	char real[PATH_MAX];
	if (!realpath(file, real))
		return true;
	for (size_t i = 0; i < s->nseen; i++)
		if (!strcmp(s->seen[i], real))
			return true;
	if (GB_GROW(&s->seen, &s->seen_cap, s->nseen + 1))
		return true;
	s->seen[s->nseen] = strdup(real);
	return !s->seen[s->nseen++];
}

/* 1 when file defines the symbol (the search ends), else 0. */
static int try_file(struct search *s, const char *file)
{
	if (seen_before(s, file))
		return 0;
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	GElf_Ehdr eh;
	struct gb_elfsyms es = { 0 };
	int hit = 0;
	if (e && elf_kind(e) == ELF_K_ELF && gelf_getehdr(e, &eh) && eh.e_machine == EM_X86_64 &&
	    (eh.e_type == ET_DYN || eh.e_type == ET_EXEC) && !gb_elfsyms_read(e, file, &es)) {
		s->found_file = true;
		const struct gb_elfsym *y = gb_elfsyms_find(&es, s->name);
		if (y && !gb_elfsym_range(y, &s->lo, &s->hi)) {
			snprintf(s->path, s->pathlen, "%s", s->seen[s->nseen - 1]);
			hit = 1;
		} else if (y && !s->unusable) {
			s->unusable = -EINVAL;
			snprintf(s->why, sizeof(s->why), "symbol %s in %s %s", y->name,
				 s->seen[s->nseen - 1], gb_elfsym_unusable(y));
		}
	}
	gb_elfsyms_free(&es);
	elf_end(e);
	close(fd);
	return hit;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Matching files of one directory: the exact name first, then the others
 * in name order. */
static int try_dir(struct search *s, const char *dir)
{
	char file[PATH_MAX];
	snprintf(file, sizeof(file), "%s/%s", dir, s->module);
	if (!access(file, R_OK) && try_file(s, file))
		return 1;
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!gb_module_matches(de->d_name, s->module) || !strcmp(de->d_name, s->module))
			continue;
		if (GB_GROW(&names, &cap, n + 1))
			break;
		if ((names[n] = strdup(de->d_name)))
			n++;
	}
	closedir(d);
	if (names)
		qsort(names, n, sizeof(*names), cmp_str);
	int hit = 0;
	for (size_t i = 0; i < n; i++) {
		snprintf(file, sizeof(file), "%s/%s", dir, names[i]);
		if (!hit)
			hit = try_file(s, file);
		free(names[i]);
	}
	free(names);
	return hit;
}

/* Each ':'-separated directory of list ($ORIGIN replaced by origin). */
static int try_list(struct search *s, const char *list, const char *origin)
{
	char *copy = strdup(list), *save = NULL;
	int hit = 0;
	for (char *t = copy ? strtok_r(copy, ":", &save) : NULL; t && !hit;
	     t = strtok_r(NULL, ":", &save)) {
		char dir[PATH_MAX];
		const char *rest = NULL;
		if (!strncmp(t, "$ORIGIN", 7))
			rest = t + 7;
		else if (!strncmp(t, "${ORIGIN}", 9))
			rest = t + 9;
		if (rest && origin)
			snprintf(dir, sizeof(dir), "%s%s", origin, rest);
		else if (!rest)
			snprintf(dir, sizeof(dir), "%s", t);
		else
			continue;
		hit = try_dir(s, dir);
	}
	free(copy);
	return hit;
}

/* The exe's DT_RUNPATH (else DT_RPATH) directories. */
static int try_runpath(struct search *s, const char *exe)
{
	char real[PATH_MAX], *slash;
	int fd = open(exe, O_RDONLY | O_CLOEXEC), hit = 0;
	if (fd < 0 || !realpath(exe, real)) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	if ((slash = strrchr(real, '/')))
		*slash = 0;
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	const char *runpath = NULL, *rpath = NULL;
	while (e && (scn = elf_nextscn(e, scn))) {
		Elf_Data *d;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Dyn dyn;
			if (!gelf_getdyn(d, (int)i, &dyn))
				break;
			if (dyn.d_tag == DT_RUNPATH)
				runpath = elf_strptr(e, sh.sh_link, dyn.d_un.d_val);
			else if (dyn.d_tag == DT_RPATH)
				rpath = elf_strptr(e, sh.sh_link, dyn.d_un.d_val);
		}
	}
	if (runpath || rpath)
		hit = try_list(s, runpath ? runpath : rpath, real);
	elf_end(e);
	close(fd);
	return hit;
}

/* Directories named in the .conf files of /etc/ld.so.conf.d (one per line). */
static int try_ldconf(struct search *s)
{
	glob_t g;
	int hit = 0;
	if (glob("/etc/ld.so.conf.d/*.conf", 0, NULL, &g))
		return 0;
	for (size_t i = 0; i < g.gl_pathc && !hit; i++) {
		FILE *f = fopen(g.gl_pathv[i], "re");
		char line[PATH_MAX];
		while (f && !hit && fgets(line, sizeof(line), f)) {
			line[strcspn(line, " \t\n#")] = 0;
			if (line[0] == '/')
				hit = try_dir(s, line);
		}
		if (f)
			fclose(f);
	}
	globfree(&g);
	return hit;
}

static const char *const loader_dirs =
	"/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/lib64:/usr/lib64:/lib:/usr/lib:"
	"/usr/local/lib/x86_64-linux-gnu:/usr/local/lib";

int gb_modfile_resolve(const char *module, const char *name, const char *exe, char *path,
		       size_t pathlen, uint64_t *lo, uint64_t *hi, const char *what)
{
	struct search s = { .module = module, .name = name, .path = path, .pathlen = pathlen };
	int hit;

	if (strchr(module, '/')) {
		hit = try_file(&s, module);
	} else {
		const char *pathenv = getenv("PATH");
		hit = (exe && try_runpath(&s, exe)) ||
		      (exe && gb_module_matches(exe, module) && try_file(&s, exe)) ||
		      try_list(&s, loader_dirs, NULL) || try_ldconf(&s) ||
		      (pathenv && try_list(&s, pathenv, NULL));
	}
	for (size_t i = 0; i < s.nseen; i++)
		free(s.seen[i]);
	free(s.seen);
	if (hit) {
		*lo = s.lo;
		*hi = s.hi;
		return 0;
	}
	if (!what)
		return s.unusable ? s.unusable : -ENOENT;
	if (s.unusable)
		gb_err("%s: %s", what, s.why);
	else if (!s.found_file)
		gb_err("%s: no x86-64 ELF file matches module '%s' in the loader's directories", what,
		       module);
	else
		gb_err("%s: symbol '%s' not found in any file matching module '%s'", what, name,
		       module);
	return s.unusable ? s.unusable : -ENOENT;
}
