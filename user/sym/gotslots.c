/* GOT slots of an IFUNC: gotslots.h. */
#include "sym/gotslots.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/grow.h"

static int slots_of(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, uint64_t resolver,
		    const char *name, struct gb_gotslots *out)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	Elf_Scn *symscn = elf_getscn(e, sh->sh_link);
	Elf_Data *syms = symscn ? elf_getdata(symscn, NULL) : NULL;
	GElf_Shdr symsh;
	if (!d || !sh->sh_entsize || (symscn && !gelf_getshdr(symscn, &symsh)))
		return 0;
	for (size_t i = 0; i < sh->sh_size / sh->sh_entsize; i++) {
		GElf_Rela r;
		GElf_Sym s;
		if (!gelf_getrela(d, (int)i, &r))
			continue;
		unsigned type = GELF_R_TYPE(r.r_info);
		bool hit = false;
		if (type == R_X86_64_IRELATIVE)
			hit = resolver && (uint64_t)r.r_addend == resolver;
		else if ((type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT ||
			  type == R_X86_64_64) && name && syms && GELF_R_SYM(r.r_info) &&
			 gelf_getsym(syms, (int)GELF_R_SYM(r.r_info), &s)) {
			const char *n = elf_strptr(e, symsh.sh_link, s.st_name);
			hit = n && !strcmp(n, name) && r.r_addend == 0;
		}
		if (!hit)
			continue;
		if (GB_GROW(&out->v, &out->cap, out->n + 1))
			return -ENOMEM;
		out->v[out->n++] = r.r_offset;
	}
	return 0;
}

int gb_gotslots_find(const char *path, uint64_t resolver, const char *name,
		     struct gb_gotslots *out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	int err = e && elf_kind(e) == ELF_K_ELF ? 0 : -ENOEXEC;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	size_t shstr = 0;
	if (!err && elf_getshdrstrndx(e, &shstr))
		err = -ENOEXEC;
	while (!err && (scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *n = elf_strptr(e, shstr, sh.sh_name);
		if (sh.sh_type == SHT_RELA)
			err = slots_of(e, scn, &sh, resolver, name, out);
		else if (n && out->nplt < 4 && (!strcmp(n, ".plt") || !strcmp(n, ".plt.sec") ||
						 !strcmp(n, ".iplt")))
			out->plt[out->nplt].lo = sh.sh_addr, out->plt[out->nplt++].hi = sh.sh_addr + sh.sh_size;
	}
	elf_end(e);
	close(fd);
	return err;
}

bool gb_gotslots_in_plt(const struct gb_gotslots *s, uint64_t va)
{
	for (size_t i = 0; i < s->nplt; i++)
		if (va >= s->plt[i].lo && va < s->plt[i].hi)
			return true;
	return false;
}

void gb_gotslots_free(struct gb_gotslots *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}
