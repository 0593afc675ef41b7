/* Symbol names as people read them: C++ (Itanium ABI) and Rust (legacy and
 * v0) names demangled by libiberty's demangler, the one binutils, gdb and
 * perf use (parameters kept; a Rust legacy name's hash dropped, as
 * rustfilt and perf show it):
 *
 *   _ZN4node5StartEiPPc            -> node::Start(int, char**)
 *   _ZN3app3Acc3add17h0123...E     -> app::Acc::add
 *   _RNvCs1234_3app4main           -> app::main
 *
 * Any other name (C's, a name the demangler refuses) is returned as it is. */
#ifndef GB_SYM_DEMANGLE_H
#define GB_SYM_DEMANGLE_H

#include <stddef.h>

/* name demangled into *buf (grown as needed: *cap its size; free it when
 * done), or name itself.  NULL for NULL. */
const char *gb_demangle(const char *name, char **buf, size_t *cap);

#endif
