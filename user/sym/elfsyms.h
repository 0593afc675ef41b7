/* The symbols and PT_LOAD segments of one ELF file, at link-time (file)
 * virtual addresses: the one symbol reader behind gb_syms (a live
 * process's modules) and the file-based resolution and entry scan.
 * .symtab when present, else .dynsym. */
#ifndef GB_SYM_ELFSYMS_H
#define GB_SYM_ELFSYMS_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gb_elfsym {
	uint64_t value, size;   /* link-time virtual address */
	char *name;
	bool global;            /* not STB_LOCAL */
	bool weak;              /* STB_WEAK */
	bool func;              /* STT_FUNC / STT_GNU_IFUNC */
	bool ifunc;             /* STT_GNU_IFUNC: the code is the resolver */
	uint32_t order;         /* index in the symbol table read */
};

struct gb_elfload {
	uint64_t vaddr, memsz, offset, filesz;
	uint32_t flags;         /* PF_X | PF_W | PF_R */
};

struct gb_elfsyms {
	struct gb_elfsym *syms;  /* sorted by value */
	size_t nsyms, syms_cap;
	struct gb_elfload *loads;
	size_t nloads;
	bool no_symtab;          /* only the dynamic symbols: no .symtab in the
				  * file and no debug file found */
};

/* 0 or -errno.  From an open ELF handle of the file at path, or from a
 * path (-ENOEXEC when the file is not ELF).  Free with gb_elfsyms_free()
 * even on error. */
int gb_elfsyms_read(Elf *e, const char *path, struct gb_elfsyms *out);
int gb_elfsyms_load(const char *path, struct gb_elfsyms *out);
/* Only its program headers (loads; no symbols): for offsets and addresses. */
int gb_elfsyms_load_headers(const char *path, struct gb_elfsyms *out);
void gb_elfsyms_free(struct gb_elfsyms *s);

/* The symbol called name (a global one wins over a local), or NULL. */
const struct gb_elfsym *gb_elfsyms_find(const struct gb_elfsyms *s, const char *name);
/* ... and a name in its demangled form as gdb takes it (a C++ or Rust name
 * with "::" or a parameter list: "app::Acc::add", "node::Start(int,
 * char**)", or without the parameters where only one function has that
 * name).  NULL with *overloads > 1 when several functions (overloads)
 * have the name without parameters. */
const struct gb_elfsym *gb_elfsyms_find_ex(const struct gb_elfsyms *s, const char *name,
					   size_t *overloads);
/* Those functions, as "'NAME(ARGS)', ..." into out (cut at len). */
void gb_elfsyms_overloads(const struct gb_elfsyms *s, const char *want, char *out, size_t len);
/* Why y cannot be a --range, as words that follow "symbol NAME in FILE":
 * it has no size, or it is an IFUNC (its code is the resolver that picks
 * an implementation at load time, not the function the name calls).  NULL
 * when it can. */
const char *gb_elfsym_unusable(const struct gb_elfsym *y);
/* The inclusive link-time range [*lo, *hi] of y: 0, or -EINVAL when
 * gb_elfsym_unusable(y) says why not (nothing is printed). */
int gb_elfsym_range(const struct gb_elfsym *y, uint64_t *lo, uint64_t *hi);

/* The symbol containing vaddr (*off = vaddr - its value), or NULL.  Of
 * several at one address, the one libdwfl's dwfl_module_addrinfo names
 * (a global before a weak one before a local, then the first in the
 * table). */
const struct gb_elfsym *gb_elfsyms_at(const struct gb_elfsyms *s, uint64_t vaddr, uint64_t *off);

/* Link-time vaddr <-> file offset through the PT_LOADs.  0, or -ENOENT
 * when no segment holds it (file-backed bytes only). */
int gb_elfsyms_to_offset(const struct gb_elfsyms *s, uint64_t vaddr, uint64_t *off);
int gb_elfsyms_to_vaddr(const struct gb_elfsyms *s, uint64_t off, uint64_t *vaddr);

/* Does the module spelling want ("" = any, a path, a file name, or a
 * file-name prefix followed by '.' or '-' in the name: "libc" matches
 * libc.so.6 and libc-2.31.so) name the file at path? */
bool gb_module_matches(const char *path, const char *want);

#endif
