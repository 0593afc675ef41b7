/* Kernel text symbols from /proc/kallsyms, to name kernel stack frames.
 * Read once.  Without privilege the kernel shows every address as 0: then
 * gb_kallsyms__new() fails (EPERM) and kernel frames stay unnamed. */
#ifndef GB_UNWIND_KALLSYMS_H
#define GB_UNWIND_KALLSYMS_H

#include <stdint.h>

struct gb_kallsyms;

struct gb_kallsyms *gb_kallsyms__new(void);   /* NULL with errno set */
/* Name of the function holding addr (valid until free), NULL if none. */
const char *gb_kallsyms__lookup(const struct gb_kallsyms *k, uint64_t addr, uint64_t *off);
void gb_kallsyms__free(struct gb_kallsyms *k);

#endif
