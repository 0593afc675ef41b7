/* Function names as gdb takes them (sym/syms.h, sym/debugfile.h): an IFUNC
 * names the implementation this process's loader bound, a local symbol of
 * Debian's libc comes from libc6-dbg's debug file, and the hint for a
 * missing debug file names the package. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "sym/debugfile.h"
#include "sym/elfsyms.h"
#include "sym/syms.h"

static const char *libc_path(void)
{
	static char path[PATH_MAX];
	Dl_info di;
	cr_assert(dladdr(dlsym(RTLD_DEFAULT, "getpid"), &di) && di.dli_fname);
	cr_assert(realpath(di.dli_fname, path));
	return path;
}

/* dlsym() of an IFUNC runs its resolver: the implementation's address. */
Test(syms, ifunc_is_the_bound_implementation)
{
	uint64_t start, end;
	char name[256];
	uint64_t off;
	/* libc's own strlen (dlsym runs the IFUNC's resolver): not the first
	 * one in the search order, which under ASan is the interceptor. */
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	cr_assert(libc);
	uintptr_t want = (uintptr_t)dlsym(libc, "strlen");
	struct gb_syms *s = gb_syms__new(getpid());
	cr_assert(s && want);
	cr_assert_eq(gb_syms__resolve(s, "libc", "strlen", &start, &end, "t"), 0);
	cr_assert_eq(start, want, "strlen resolved to %#lx, dlsym says %#lx", (unsigned long)start,
		     (unsigned long)want);
	cr_assert_gt(end, start);
	/* ... and that implementation's own name gives the same range */
	if (gb_syms__lookup(s, start, name, sizeof(name), &off) == 0 && strcmp(name, "strlen")) {
		uint64_t s2, e2;
		cr_assert_eq(off, 0);
		cr_assert_eq(gb_syms__resolve(s, "libc", name, &s2, &e2, "t"), 0);
		cr_assert(s2 == start && e2 == end, "%s", name);
	}
	gb_syms__free(s);
	dlclose(libc);
}

Test(syms, libc_local_symbols_from_the_debug_file)
{
	struct gb_elfsyms es;
	cr_assert_eq(gb_elfsyms_load(libc_path(), &es), 0);
	if (es.no_symtab) {
		gb_elfsyms_free(&es);
		cr_skip_test("libc6-dbg is not installed");
	}
	/* local in the full table, absent from .dynsym */
	const struct gb_elfsym *y = gb_elfsyms_find(&es, "__strlen_sse2");
	cr_assert(y && y->func && !y->global && y->size > 0);
	gb_elfsyms_free(&es);
}

Test(debugfile, hint_names_the_package)
{
	char hint[8192];
	gb_debugfile_hint(libc_path(), hint, sizeof(hint));
	const char *want = "libc6-dbg (its debug file is /usr/lib/debug/.build-id/";
	cr_assert(!strncmp(hint, want, strlen(want)), "%s", hint);
	gb_debugfile_hint("/nonexistent/libx.so", hint, sizeof(hint));
	cr_assert(strstr(hint, "its debug file as /usr/lib/debug/nonexistent/libx.so.debug"),
		  "%s", hint);
}

/* The range resolver and the sampler's unwinder (libdwfl's
 * dwfl_module_addrinfo) give an address the same name, aliases included
 * (malloc / __libc_malloc / __malloc, __memmove_* / __memcpy_*). */
Test(syms, names_like_the_unwinder)
{
	struct gb_elfsyms es;
	const char *path = libc_path();
	cr_assert_eq(gb_elfsyms_load(path, &es), 0);
	Dwfl *d = dwfl_begin(&gb_debugfile_callbacks);
	dwfl_report_begin(d);
	Dwfl_Module *m = dwfl_report_elf(d, path, path, -1, 0, true);
	dwfl_report_end(d, NULL, NULL);
	cr_assert(m);
	size_t compared = 0;
	for (size_t i = 0; i < es.nsyms; i++) {
		const struct gb_elfsym *y = &es.syms[i], *mine;
		if (!y->func || !y->size)
			continue;
		uint64_t off, a = y->value + (i % 3 ? y->size / 2 : 0);
		GElf_Off doff;
		GElf_Sym ds;
		const char *theirs = dwfl_module_addrinfo(m, a, &doff, &ds, NULL, NULL, NULL);
		mine = gb_elfsyms_at(&es, a, &off);
		if (!theirs || !mine)
			continue;
		cr_assert_str_eq(mine->name, theirs, "at %#lx", (unsigned long)a);
		cr_assert_eq(off, doff, "at %#lx", (unsigned long)a);
		compared++;
	}
	cr_assert_gt(compared, 1000);
	dwfl_end(d);
	gb_elfsyms_free(&es);
}
