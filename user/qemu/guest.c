/* Symbols of the guest binary with libelf (guest.h). */
#include "qemu/guest.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The load bias: 0 for ET_EXEC; for ET_DYN start_code minus the lowest
 * p_vaddr of the executable PT_LOADs, checked against the entry when the
 * binary has no interpreter (with one, QEMU's entry is the interpreter's). */
static int load_bias(Elf *e, const char *path, const struct gb_qguest_load *load, uint64_t *bias,
		     char *err, size_t len)
{
	GElf_Ehdr eh;
	size_t nph;
	if (!gelf_getehdr(e, &eh) || elf_getphdrnum(e, &nph)) {
		snprintf(err, len, "%s: not an ELF executable: %s", path, elf_errmsg(-1));
		return -1;
	}
	if (eh.e_type == ET_EXEC) {
		*bias = 0;
		return 0;
	}
	if (eh.e_type != ET_DYN) {
		snprintf(err, len, "%s: not an executable (ELF type %u)", path, eh.e_type);
		return -1;
	}
	uint64_t low = UINT64_MAX;
	bool interp = false;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)i, &ph))
			continue;
		if (ph.p_type == PT_INTERP)
			interp = true;
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && ph.p_vaddr < low)
			low = ph.p_vaddr;
	}
	*bias = load->start_code - low;
	if (low == UINT64_MAX || (!interp && eh.e_entry + *bias != load->entry)) {
		snprintf(err, len, "%s: PIE load bias unknown: QEMU's start of code 0x%llx and entry "
			 "0x%llx do not match the file's (give the range as START-END)", path,
			 (unsigned long long)load->start_code, (unsigned long long)load->entry);
		return -1;
	}
	return 0;
}

/* The sized, defined symbol called name in section scn's table: 1 found,
 * 0 not, preferring a function. */
static int find_in(Elf *e, Elf_Scn *scn, const char *name, GElf_Sym *out)
{
	GElf_Shdr sh;
	Elf_Data *d = elf_getdata(scn, NULL);
	int found = 0;
	if (!gelf_getshdr(scn, &sh) || !d || !sh.sh_entsize)
		return 0;
	size_t n = sh.sh_size / sh.sh_entsize;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym s;
		if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF || !s.st_size)
			continue;
		const char *nm = elf_strptr(e, sh.sh_link, s.st_name);
		if (!nm || strcmp(nm, name))
			continue;
		if (GELF_ST_TYPE(s.st_info) == STT_FUNC) {
			*out = s;
			return 1;
		}
		if (!found) {
			*out = s;
			found = 1;
		}
	}
	return found;
}

int gb_qguest_symbol(const char *path, const struct gb_qguest_load *load, const char *module,
		     const char *symbol, uint64_t *lo, uint64_t *hi, char *err, size_t len)
{
	int rc = -1, fd = -1;
	Elf *e = NULL;
	if (module) {
		const char *base = strrchr(path, '/');
		base = base ? base + 1 : path;
		if (strcmp(module, base)) {
			snprintf(err, len, "%s:%s: the plugin resolves symbols of the guest binary "
				 "(%s) only", module, symbol, base);
			return -1;
		}
	}
	elf_version(EV_CURRENT);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, len, "%s: %s", path, strerror(errno));
		return -1;
	}
	e = elf_begin(fd, ELF_C_READ, NULL);
	uint64_t bias;
	if (!e || elf_kind(e) != ELF_K_ELF) {
		snprintf(err, len, "%s: not an ELF file", path);
		goto out;
	}
	if (load_bias(e, path, load, &bias, err, len))
		goto out;
	GElf_Sym s = { 0 };
	int found = 0;
	for (int pass = 0; pass < 2 && !found; pass++) {
		Elf_Scn *scn = NULL;
		while (!found && (scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;
			if (gelf_getshdr(scn, &sh) &&
			    sh.sh_type == (pass ? SHT_DYNSYM : SHT_SYMTAB))
				found = find_in(e, scn, symbol, &s);
		}
	}
	if (!found) {
		snprintf(err, len, "%s: no sized symbol %s", path, symbol);
		goto out;
	}
	*lo = s.st_value + bias;
	*hi = s.st_value + s.st_size - 1 + bias;
	rc = 0;
out:
	if (e)
		elf_end(e);
	close(fd);
	return rc;
}
