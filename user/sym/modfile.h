/* MODULE:SYMBOL without a process: the file the dynamic loader would map
 * for MODULE, and SYMBOL's link-time range in it.  For ranges pending
 * until their module is mapped (an exec chain, a later dlopen): uprobes
 * attach by path and file offset before the file is mapped. */
#ifndef GB_SYM_MODFILE_H
#define GB_SYM_MODFILE_H

#include <stddef.h>
#include <stdint.h>

/* module: a path (used as is), a file name, or a file-name prefix
 * ("libc", "libffi": gb_module_matches()).  Searched in order: the
 * RUNPATH/RPATH of exe (NULL: none; $ORIGIN expanded), exe itself, the
 * loader's directories (/lib/x86_64-linux-gnu, /usr/lib/x86_64-linux-gnu,
 * /lib64, /usr/lib64, /lib, /usr/lib, /usr/local/lib/x86_64-linux-gnu,
 * /usr/local/lib, and those named in the .conf files of /etc/ld.so.conf.d), then $PATH.
 * Among the x86-64 ELF files that match (each real file once; exact names
 * first), the first that defines name usably (gb_elfsym_range()) wins.
 * Sets path (the real path, as /proc/PID/maps will show the file once it
 * is mapped) and the inclusive link-time [*lo, *hi].  0, or -ENOENT /
 * -EINVAL, with one "gebpf: WHAT: <why>" line when what is not NULL. */
int gb_modfile_resolve(const char *module, const char *name, const char *exe, char *path,
		       size_t pathlen, uint64_t *lo, uint64_t *hi, const char *what);

#endif
