/* A --range spec resolved against a live process. */
#ifndef GB_TRACE_RANGE_H
#define GB_TRACE_RANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/parse.h"

/* Fills has_start/has_end/start/end of *out from spec (addresses are used as
 * given; symbols resolved with the process's ELF symbol tables).  0, or
 * -errno with one "gebpf: range SPEC: <why>" line printed when report (a
 * caller that will retry passes false). */
int gb_range_resolve(const struct gb_range_spec *spec, pid_t pid, struct gb_range_spec *out,
		     bool report);
/* Text for messages: "0x401000-0x40101f" or "SYMBOL" / "MODULE:SYMBOL". */
void gb_range_describe(const struct gb_range_spec *spec, char *buf, size_t len);

#endif
