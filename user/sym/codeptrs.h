/* Addresses of a file's code that its data holds or its code takes
 * (docs/trace.md "The patch trap", "In-range misses"): 8-byte values in
 * [lo, hi] found in the file's loadable, non-executable segments (a non-PIE
 * file's jump tables of labels, such as Python's computed-goto
 * `opcode_targets`, and function pointers), the addends of its
 * R_X86_64_RELATIVE relocations in [lo, hi] (the same in a PIE file, whose
 * data holds them only once relocated), the targets of its code's
 * `lea r64, [rip+disp32]`, the entries of a table of 32-bit offsets such a
 * lea names in the data (a PIC switch), and in a non-PIE file 4-byte
 * values of its code (immediates).  Link-time
 * addresses, ascending, unique; candidates only (any 8 bytes of data may
 * look like an address): the caller keeps those that are instruction
 * starts.
 *
 *   uint64_t *v; size_t n;
 *   if (gb_codeptrs_find("/usr/bin/python3", lo, hi, &v, &n) == 0) ... free(v);
 */
#ifndef GB_SYM_CODEPTRS_H
#define GB_SYM_CODEPTRS_H

#include <stddef.h>
#include <stdint.h>

/* 0 or -errno. */
int gb_codeptrs_find(const char *path, uint64_t lo, uint64_t hi, uint64_t **out, size_t *n);

#endif
