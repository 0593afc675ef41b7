/* Separate debug files: where the full symbol table of a stripped file is
 * (Debian's libc6-dbg, -dbgsym packages, a debuginfod cache), for every
 * reader of symbols (elfsyms.c for --range / snap --at / sample --range,
 * unwind/ for the sampler's stacks), and what to install when it is missing.
 *
 * Looked for as gdb and perf do: /usr/lib/debug/.build-id/NN/REST.debug
 * by build ID, then the .gnu_debuglink name next to the file, in its
 * .debug/ and under /usr/lib/debug/ (libdwfl's standard lookup,
 * dwfl_standard_find_debuginfo), then the debuginfod client's cache
 * ($DEBUGINFOD_CACHE_PATH, else $XDG_CACHE_HOME/debuginfod_client, else
 * ~/.cache/debuginfod_client: BUILDID/debuginfo) without asking a server. */
#ifndef GB_SYM_DEBUGFILE_H
#define GB_SYM_DEBUGFILE_H

#include <elfutils/libdwfl.h>
#include <stddef.h>

/* Dwfl_Callbacks.find_debuginfo: the standard lookup, then the cache. */
int gb_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		      const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
		      char **debuginfo_file_name);

/* The Dwfl_Callbacks for reading one file's symbols (elfsyms.c). */
extern const Dwfl_Callbacks gb_debugfile_callbacks;

/* What to do about the missing debug file of path (which has no .symtab),
 * as words that follow "install": "libc6-dbg (its debug file is
 * /usr/lib/debug/.build-id/NN/REST.debug)", "libfoo1-dbgsym (...)", or,
 * for a file no package owns, "its debug file as ...". */
void gb_debugfile_hint(const char *path, char *buf, size_t len);

#endif
