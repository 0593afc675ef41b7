/* Code addresses held by a file's data: see codeptrs.h. */
#include "sym/codeptrs.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/grow.h"

struct found { uint64_t *v; size_t n, cap; };

static int add(struct found *f, uint64_t v)
{
	if (GB_GROW(&f->v, &f->cap, f->n + 1))
		return -ENOMEM;
	f->v[f->n++] = v;
	return 0;
}

/* The loadable segments that are not code: their file bytes. */
static int scan_data(Elf *e, uint64_t lo, uint64_t hi, struct found *f)
{
	size_t nph, size;
	const char *img = elf_rawfile(e, &size);
	if (!img || elf_getphdrnum(e, &nph))
		return -ENOEXEC;
	for (size_t k = 0; k < nph; k++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)k, &ph) || ph.p_type != PT_LOAD || (ph.p_flags & PF_X) ||
		    ph.p_offset > size || ph.p_filesz > size - ph.p_offset)
			continue;
		/* 8-aligned in memory (p_vaddr and p_offset agree mod the page) */
		uint64_t skip = (8 - ph.p_vaddr % 8) % 8;
		for (uint64_t o = skip; o + 8 <= ph.p_filesz; o += 8) {
			uint64_t v;
			memcpy(&v, img + ph.p_offset + o, 8);
			if (v >= lo && v <= hi && add(f, v))
				return -ENOMEM;
		}
	}
	return 0;
}

static int scan_relative(Elf *e, uint64_t lo, uint64_t hi, struct found *f)
{
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
		GElf_Shdr sh;
		Elf_Data *d;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Rela r;
			if (gelf_getrela(d, (int)i, &r) && GELF_R_TYPE(r.r_info) == R_X86_64_RELATIVE &&
			    (uint64_t)r.r_addend >= lo && (uint64_t)r.r_addend <= hi &&
			    add(f, (uint64_t)r.r_addend))
				return -ENOMEM;
		}
	}
	return 0;
}

/* The file bytes of [va, va+len) in a non-executable loadable segment, or
 * NULL. */
static const uint8_t *data_at(Elf *e, const uint8_t *img, size_t size, size_t nph, uint64_t va,
			      uint64_t len)
{
	for (size_t k = 0; k < nph; k++) {
		GElf_Phdr ph;
		if (gelf_getphdr(e, (int)k, &ph) && ph.p_type == PT_LOAD && !(ph.p_flags & PF_X) &&
		    va >= ph.p_vaddr && va - ph.p_vaddr <= ph.p_filesz &&
		    len <= ph.p_filesz - (va - ph.p_vaddr) && ph.p_offset <= size &&
		    ph.p_filesz <= size - ph.p_offset)
			return img + ph.p_offset + (va - ph.p_vaddr);
	}
	return NULL;
}

/* A switch's table of 32-bit offsets from its own start (what GCC makes
 * for position-independent code: lea rsi, [rip+table]; movsxd rcx,
 * [rsi+rcx*4]; add rcx, rsi; jmp rcx) at t, if the data there is one: its
 * entries while they land in [lo, hi]. */
#define REL_TABLE_MAX 4096
static int rel_table(Elf *e, const uint8_t *img, size_t size, size_t nph, uint64_t t,
		     uint64_t lo, uint64_t hi, struct found *f)
{
	for (uint64_t k = 0; k < REL_TABLE_MAX; k++) {
		const uint8_t *p = data_at(e, img, size, nph, t + 4 * k, 4);
		int32_t v;
		if (!p)
			return 0;
		memcpy(&v, p, 4);
		uint64_t c = t + (uint64_t)(int64_t)v;
		if (c < lo || c > hi)
			return 0;
		if (add(f, c))
			return -ENOMEM;
	}
	return 0;
}

/* The executable segments: the targets of `lea r64, [rip+disp32]` (how
 * code takes a function's address, PIE or not) and, in a non-PIE file,
 * 4-byte values at any offset (`mov r32, imm32`, `mov qword [m], imm32`,
 * `cmp rax, imm32`: Python's callbacks stored from its code); a lea's
 * target in the data may be a switch's table of offsets (rel_table). */
static int scan_code(Elf *e, uint64_t lo, uint64_t hi, struct found *f)
{
	size_t nph, size;
	GElf_Ehdr eh;
	const uint8_t *img = (const uint8_t *)elf_rawfile(e, &size);
	if (!img || elf_getphdrnum(e, &nph) || !gelf_getehdr(e, &eh))
		return -ENOEXEC;
	bool abs32 = eh.e_type == ET_EXEC && hi <= UINT32_MAX;
	for (size_t k = 0; k < nph; k++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)k, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) ||
		    ph.p_offset > size || ph.p_filesz > size - ph.p_offset)
			continue;
		const uint8_t *b = img + ph.p_offset;
		for (uint64_t o = 0; o + 4 <= ph.p_filesz; o++) {
			uint32_t v;
			memcpy(&v, b + o, 4);
			if (abs32 && v >= lo && v <= hi && add(f, v))
				return -ENOMEM;
			/* REX.W 8d, mod 00 rm 101: the disp32 at o, the end at o + 4 */
			if (o >= 3 && (b[o - 3] & 0xf8) == 0x48 && b[o - 2] == 0x8d &&
			    (b[o - 1] & 0xc7) == 0x05) {
				uint64_t t = ph.p_vaddr + o + 4 + (uint64_t)(int64_t)(int32_t)v;
				if (t >= lo && t <= hi && add(f, t))
					return -ENOMEM;
				if ((t < lo || t > hi) && t % 4 == 0 &&
				    rel_table(e, img, size, nph, t, lo, hi, f))
					return -ENOMEM;
			}
		}
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int gb_codeptrs_find(const char *path, uint64_t lo, uint64_t hi, uint64_t **out, size_t *n)
{
	struct found f = { 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC), r = -ENOEXEC;
	*out = NULL;
	*n = 0;
	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (e && elf_kind(e) == ELF_K_ELF && !(r = scan_data(e, lo, hi, &f)) &&
	    !(r = scan_relative(e, lo, hi, &f)))
		r = scan_code(e, lo, hi, &f);
	if (e)
		elf_end(e);
	close(fd);
	if (r) {
		free(f.v);
		return r;
	}
	if (f.n)
		qsort(f.v, f.n, sizeof(*f.v), cmp_u64);
	size_t w = 0;
	for (size_t k = 0; k < f.n; k++)
		if (!w || f.v[w - 1] != f.v[k])
			f.v[w++] = f.v[k];
	*out = f.v;
	*n = w;
	return 0;
}
