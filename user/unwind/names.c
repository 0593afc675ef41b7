/* Naming addresses of a process the unwinder knows (unwind.h:
 * gb_unwinder__describe, __symbol, __exe). */
#include <errno.h>
#include <search.h>
#include <stdio.h>
#include <string.h>

#include "sym/demangle.h"
#include "sym/perfmap.h"
#include "unwind/internal.h"

/* Code in no module of a live process: its runtime's perf map names it
 * (sym/perfmap.h), as perf, pprof's converters and the profilers that
 * read the convention do; module the map's name, the piece of code its
 * range. */
static int name_jit(struct proc *p, uint64_t a, uint64_t addr, struct gb_frame_info *fi)
{
	uint64_t start, size;
	if (!p->jit)
		p->jit = gb_perfmap__open(p->pid);
	const char *n = p->jit ? gb_perfmap__lookup(p->jit, a, &start, &size) : NULL;
	if (!n)
		return -ENOENT;
	fi->func = fi->sym = n;
	fi->func_off = addr - start;
	fi->module = gb_perfmap__name(p->jit);
	fi->mod_start = start;
	fi->mod_end = start + size;
	return 0;
}

/* The source file of a's line in m (and *line), or NULL.  (The module's
 * line tables: its DWARF read, and inflated, the first time.) */
static const char *source_of(Dwfl_Module *m, uint64_t a, int *line)
{
	Dwfl_Line *l = dwfl_module_getsrc(m, a);
	return l ? dwfl_lineinfo(l, NULL, line, NULL, NULL, NULL) : NULL;
}

/* How much name_addr() tells. */
enum depth { SYMBOL, IDENTITY, SOURCE };

static int name_addr(struct gb_unwinder *u, pid_t pid, uint64_t addr, bool ret,
		     struct gb_frame_info *fi, enum depth full)
{
	struct proc *p = unw_get_proc(u, pid);
	uint64_t a = ret ? addr - 1 : addr;
	Dwfl_Module *m;
	const unsigned char *bits;
	GElf_Addr vaddr;
	GElf_Off off = 0;
	GElf_Sym sym;
	Dwarf_Addr lo, hi;
	int n;

	memset(fi, 0, sizeof(*fi));
	m = p ? unw_module_of(p, a) : NULL;
	if (!m)
		return p && !p->image ? name_jit(p, a, addr, fi) : -ENOENT;
	fi->module = dwfl_module_info(m, NULL, &lo, &hi, NULL, NULL, NULL, NULL);
	fi->mod_start = lo;
	fi->mod_end = hi;
	fi->sym = fi->func = dwfl_module_addrinfo(m, a, &off, &sym, NULL, NULL, NULL);
	if (fi->func && strchr(fi->func, '@')) {
		/* "memcpy@@GLIBC_2.14": the name without its symbol version. */
		snprintf(u->func, sizeof(u->func), "%.*s", (int)strcspn(fi->func, "@"), fi->func);
		fi->func = u->func;
	}
	fi->func = gb_demangle(fi->func, &u->dem, &u->demcap);
	fi->func_off = off + (addr - a);
	if (full == SYMBOL)
		return 0;
	n = dwfl_module_build_id(m, &bits, &vaddr);
	if (n > 0 && n <= 64) {
		for (int i = 0; i < n; i++)
			sprintf(u->build_id + 2 * i, "%02x", bits[i]);
		fi->build_id = u->build_id;
	}
	if (full == SOURCE)
		fi->file = source_of(m, a, &fi->line);
	return 0;
}

int gb_unwinder__describe(struct gb_unwinder *u, pid_t pid, uint64_t addr, bool ret,
			  struct gb_frame_info *fi)
{
	return name_addr(u, pid, addr, ret, fi, SOURCE);
}

int gb_unwinder__identify(struct gb_unwinder *u, pid_t pid, uint64_t addr, bool ret,
			  struct gb_frame_info *fi)
{
	return name_addr(u, pid, addr, ret, fi, IDENTITY);
}

const char *gb_unwinder__source(struct gb_unwinder *u, pid_t pid, uint64_t addr, bool ret,
				int *line)
{
	struct proc *p = unw_get_proc(u, pid);
	uint64_t a = ret ? addr - 1 : addr;
	Dwfl_Module *m = p ? unw_module_of(p, a) : NULL;

	*line = 0;
	return m ? source_of(m, a, line) : NULL;
}

int gb_unwinder__symbol(struct gb_unwinder *u, pid_t pid, uint64_t addr, bool ret,
			struct gb_frame_info *fi)
{
	return name_addr(u, pid, addr, ret, fi, SYMBOL);
}

const char *gb_unwinder__exe(struct gb_unwinder *u, pid_t pid)
{
	struct proc key = { .pid = pid }, **slot = tfind(&key, &u->procs, unw_cmp_proc);
	return slot ? (*slot)->exe : NULL;
}
