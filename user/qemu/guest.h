/* The guest binary's symbols, for range=SYMBOL (docs/qemu.md "Ranges").
 *
 * QEMU user mode loads the binary itself: a non-PIE (ET_EXEC) binary at its
 * own addresses, a PIE (ET_DYN) one at a load bias QEMU chose.  The bias is
 * exact from what QEMU gives a plugin once the binary is loaded:
 * qemu_plugin_start_code() is the bias plus the lowest p_vaddr of the
 * executable PT_LOADs (linux-user/elfload.c).  Without an interpreter
 * qemu_plugin_entry_code() must also be the bias plus e_entry (with one it
 * is the interpreter's entry), or the range is refused. */
#ifndef GB_QEMU_GUEST_H
#define GB_QEMU_GUEST_H

#include <stddef.h>
#include <stdint.h>

struct gb_qguest_load {
	uint64_t entry;        /* qemu_plugin_entry_code() */
	uint64_t start_code;   /* qemu_plugin_start_code() */
};

/* Resolve SYMBOL (MODULE:SYMBOL when module is not NULL: MODULE must be the
 * binary's file name) in the ELF file at path to the inclusive range
 * [*lo, *hi] where QEMU loaded it: [st_value, st_value + st_size - 1] plus
 * the load bias, as `gebpf trace --range SYMBOL`.  0, or -1 with one line
 * ("why") in err. */
int gb_qguest_symbol(const char *path, const struct gb_qguest_load *load, const char *module,
		     const char *symbol, uint64_t *lo, uint64_t *hi, char *err, size_t len);

#endif
