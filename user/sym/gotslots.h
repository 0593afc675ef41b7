/* Where a file's relocated GOT holds the implementation an IFUNC chose:
 * the slots the dynamic loader writes for a symbol at load time, read from
 * the file's relocations (.rela.dyn, .rela.plt), at link-time addresses.
 *
 * - R_X86_64_IRELATIVE with addend = the resolver's address: the module's
 *   own calls to the IFUNC (libc calling strlen), relocated when the loader
 *   relocates the module, before the program's entry point runs;
 * - R_X86_64_JUMP_SLOT / GLOB_DAT / 64 against the symbol's name: another
 *   module's calls (the program's strlen@plt), bound at load time under
 *   BIND_NOW, else at the first call. */
#ifndef GB_SYM_GOTSLOTS_H
#define GB_SYM_GOTSLOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gb_gotslots {
	uint64_t *v;             /* link-time addresses of the slots */
	size_t n, cap;
	/* The file's PLT stubs (.plt, .plt.sec, .iplt): a slot pointing there
	 * is not bound yet (lazy binding; a static executable's IRELATIVE
	 * slots until __libc_start_main relocates them). */
	struct { uint64_t lo, hi; } plt[4];
	size_t nplt;
};

/* Append to out the slots of path that hold the value of the IFUNC whose
 * resolver is at resolver (its module: irelative) or of the symbol name
 * (any module: by name; NULL: none).  0 or -errno. */
int gb_gotslots_find(const char *path, uint64_t resolver, const char *name,
		     struct gb_gotslots *out);
/* Is link-time address va in one of the PLT sections found by find? */
bool gb_gotslots_in_plt(const struct gb_gotslots *s, uint64_t va);
void gb_gotslots_free(struct gb_gotslots *s);

#endif
