#include "trace/pagetrap.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "common/log.h"
#include "ptrace/inject.h"
#include "ptrace/maps.h"

#ifndef SEGV_ACCERR
#define SEGV_ACCERR 2
#endif

/* A run of trapped pages with one original protection. */
struct region {
	uint64_t start, end;   /* [start, end), page aligned */
	int orig_prot;         /* what the program has (with PROT_EXEC) */
};

struct gb_pagetrap {
	pid_t pid;
	uint64_t start, end;   /* [start, end) page-aligned cover of the range */
	struct region *r;
	size_t nr;
	bool armed;
	uint64_t syscall_insn;
	struct gb_pagetrap_stats st;
};

/* Rebuild the regions from the maps: only executable file/anon mappings
 * intersecting [start, end) are trapped.  With expect_armed, a region whose
 * current protection is not orig & ~EXEC was changed by the program. */
static int load_regions(struct gb_pagetrap *p)
{
	struct gb_maps m;
	int e = gb_maps_read(p->pid, &m);
	if (e)
		return e;
	free(p->r);
	p->r = NULL;
	p->nr = 0;
	for (size_t i = 0; i < m.n; i++) {
		const struct gb_map *mp = &m.v[i];
		uint64_t s = mp->start > p->start ? mp->start : p->start;
		uint64_t t = mp->end < p->end ? mp->end : p->end;
		if (s >= t || !(mp->prot & PROT_EXEC))
			continue;
		struct region *v = realloc(p->r, (p->nr + 1) * sizeof(*v));
		if (!v) {
			gb_maps_free(&m);
			return -ENOMEM;
		}
		p->r = v;
		p->r[p->nr++] = (struct region){ s, t, mp->prot };
	}
	gb_maps_free(&m);
	return 0;
}

struct gb_pagetrap *gb_pagetrap__new(pid_t pid, uint64_t start, uint64_t end)
{
	struct gb_pagetrap *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->start = start & ~0xfffull;
	p->end = (end | 0xfffull) + 1;
	if (load_regions(p) || !p->nr) {
		gb_err("range 0x%llx-0x%llx: not in an executable mapping of pid %d",
		       (unsigned long long)start, (unsigned long long)end, pid);
		gb_pagetrap__free(p);
		return NULL;
	}
	p->syscall_insn = gb_inject_find_syscall(pid, p->start, p->end);
	if (!p->syscall_insn) {
		gb_err("pid %d: no syscall instruction to inject mprotect through (no vDSO?)", pid);
		gb_pagetrap__free(p);
		return NULL;
	}
	return p;
}

void gb_pagetrap__free(struct gb_pagetrap *p)
{
	if (!p)
		return;
	free(p->r);
	free(p);
}

static int mprotect_in(struct gb_pagetrap *p, pid_t tid, uint64_t a, uint64_t len, int prot,
		       int *pending_sig)
{
	uint64_t args[6] = { a, len, (uint64_t)prot, 0, 0, 0 };
	long ret = 0;
	int e = gb_inject_syscall(tid, p->syscall_insn, SYS_mprotect, args, &ret, pending_sig);
	if (e)
		return e;
	return ret < 0 && ret > -4096 ? (int)ret : 0;
}

int gb_pagetrap__arm(struct gb_pagetrap *p, pid_t tid, int *pending_sig)
{
	if (p->armed)
		return 0;
	/* Re-read: the program may have changed the pages while they were
	 * open (mprotect, munmap, a new mapping). */
	int e = load_regions(p);
	if (e)
		return e;
	for (size_t i = 0; i < p->nr; i++) {
		struct region *r = &p->r[i];
		e = mprotect_in(p, tid, r->start, r->end - r->start, r->orig_prot & ~PROT_EXEC, pending_sig);
		if (e)
			return e;
	}
	p->armed = true;
	p->st.arms++;
	return 0;
}

int gb_pagetrap__disarm(struct gb_pagetrap *p, pid_t tid, int *pending_sig)
{
	if (!p->armed)
		return 0;
	struct gb_maps m;
	int e = gb_maps_read(p->pid, &m);
	if (e)
		return e;
	for (size_t i = 0; i < p->nr && !e; i++) {
		struct region *r = &p->r[i];
		/* Restore only what still carries our protection: pages the
		 * program unmapped or re-protected keep what it did. */
		for (uint64_t a = r->start; a < r->end && !e;) {
			const struct gb_map *mp = gb_maps_find(&m, a);
			uint64_t stop = mp ? (mp->end < r->end ? mp->end : r->end) : a + 4096;
			if (mp && mp->prot == (r->orig_prot & ~PROT_EXEC))
				e = mprotect_in(p, tid, a, stop - a, r->orig_prot, pending_sig);
			a = stop;
		}
	}
	gb_maps_free(&m);
	if (e)
		return e;
	p->armed = false;
	p->st.disarms++;
	return 0;
}

bool gb_pagetrap__armed(const struct gb_pagetrap *p) { return p->armed; }

bool gb_pagetrap__covers(const struct gb_pagetrap *p, uint64_t pc)
{
	for (size_t i = 0; i < p->nr; i++)
		if (pc >= p->r[i].start && pc < p->r[i].end)
			return true;
	return false;
}

bool gb_pagetrap__is_entry(struct gb_pagetrap *p, const struct gb_stop *st, uint64_t rip)
{
	if (!p->armed || st->kind != GB_STOP_SIGNAL || st->sig != SIGSEGV ||
	    st->code != SEGV_ACCERR || st->fault_addr != rip || !gb_pagetrap__covers(p, rip))
		return false;
	/* Still our protection?  If the program made the page non-executable
	 * itself, this fault is its own. */
	struct gb_maps m;
	if (gb_maps_read(p->pid, &m))
		return false;
	const struct gb_map *mp = gb_maps_find(&m, rip);
	bool ours = false;
	for (size_t i = 0; mp && i < p->nr; i++)
		if (rip >= p->r[i].start && rip < p->r[i].end)
			ours = mp->prot == (p->r[i].orig_prot & ~PROT_EXEC);
	gb_maps_free(&m);
	if (ours)
		p->st.entries++;
	return ours;
}

int gb_pagetrap__fix_child(struct gb_pagetrap *p, pid_t child)
{
	if (!p->armed)
		return 0;
	int sig = 0, e = 0;
	for (size_t i = 0; i < p->nr && !e; i++)
		e = mprotect_in(p, child, p->r[i].start, p->r[i].end - p->r[i].start,
				p->r[i].orig_prot, &sig);
	if (sig)
		kill(child, sig); /* re-queue what arrived meanwhile */
	return e;
}

void gb_pagetrap__drop(struct gb_pagetrap *p)
{
	p->armed = false;
	p->nr = 0;
}

void gb_pagetrap__stats(const struct gb_pagetrap *p, struct gb_pagetrap_stats *s) { *s = p->st; }
