/* Symbols of a live process: ELF symbol tables (.symtab, then .dynsym) of
 * every mapped file, placed at their run-time addresses using the process's
 * maps (so PIE executables and shared libraries work).
 *
 *   struct gb_syms *s = gb_syms__new(pid);
 *   gb_syms__resolve(s, "libc", "memcpy", &start, &end, "range libc:memcpy");
 *   gb_syms__lookup(s, addr, name, sizeof(name), &off);
 *   gb_syms__free(s);
 */
#ifndef GB_SYM_SYMS_H
#define GB_SYM_SYMS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/parse.h"

struct gb_syms;

struct gb_syms *gb_syms__new(pid_t pid);   /* NULL on error (errno set) */
void gb_syms__free(struct gb_syms *s);

/* Inclusive run-time range [*start, *end] of a function or object symbol.
 * module: "" for any module (the main executable wins), else a path, a file
 * name, or a file-name prefix ("libc" matches libc.so.6).  0, or -ENOENT / -EINVAL, with
 * one "gebpf: WHAT: <why>" line when what is not NULL (NULL: the caller
 * will retry or fall back, and says nothing yet). */
int gb_syms__resolve(struct gb_syms *s, const char *module, const char *name,
		     uint64_t *start, uint64_t *end, const char *what);

/* Name of the symbol containing addr and the offset into it.  0, or -ENOENT
 * (name then holds "module+0xoff" when addr is in a mapped file). */
int gb_syms__lookup(struct gb_syms *s, uint64_t addr, char *name, size_t len, uint64_t *off);

/* The sized function symbol containing addr: its name, run-time start and
 * size.  0, or -ENOENT when no sized function symbol of a mapped file
 * covers addr. */
int gb_syms__func_at(struct gb_syms *s, uint64_t addr, char *name, size_t len, uint64_t *start,
		     uint64_t *size);

/* Run-time address -> the file mapped there, its link-time virtual
 * address and file offset (for a uprobe) through /proc/PID/maps and the
 * file's PT_LOADs.  0, or -ENOENT when addr is not in file-backed code or
 * data of a regular file. */
int gb_syms__to_file(struct gb_syms *s, uint64_t addr, char *path, size_t len,
		     uint64_t *vaddr, uint64_t *offset);

/* The one resolver of a range spec (common/parse.h) against a live
 * process, for trace --range, sample --range and snap --at: *out is spec
 * with a SYMBOL / MODULE:SYMBOL turned into its inclusive run-time
 * START-END (an address or empty spec is copied as it is).  0, or -errno
 * with one "gebpf: WHAT: pid PID: <why>" line when what is not NULL. */
int gb_sym_range_resolve(const struct gb_range_spec *spec, pid_t pid, struct gb_range_spec *out,
			 const char *what);

#endif
