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
#include "trace/tramp.h"

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
	struct gb_vmaq *vq;    /* VMA queries on the process (PROCMAP_QUERY) */
	struct gb_tramp *tramp;  /* re-protect on the way out without a stop */
	bool no_tramp;           /* mapping the trampoline failed once */
	struct gb_pagetrap_stats st;
};

/* Rebuild the regions from the process's VMAs: only executable mappings
 * intersecting [start, end) are trapped. */
static int load_regions(struct gb_pagetrap *p)
{
	struct gb_vma v;
	p->nr = 0;
	for (uint64_t a = p->start; a < p->end; a = v.end) {
		int e = gb_vmaq__find(p->vq, a, true, &v);
		if (e == -ENOENT || (!e && v.start >= p->end))
			break;
		if (e)
			return e;
		uint64_t s = v.start > p->start ? v.start : p->start;
		uint64_t t = v.end < p->end ? v.end : p->end;
		if (!(v.prot & PROT_EXEC))
			continue;
		struct region *r = realloc(p->r, (p->nr + 1) * sizeof(*r));
		if (!r)
			return -ENOMEM;
		p->r = r;
		p->r[p->nr++] = (struct region){ s, t, v.prot };
	}
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
	p->vq = gb_vmaq__open(pid);
	if (!p->vq || load_regions(p) || !p->nr) {
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
	gb_tramp__free(p->tramp);
	gb_vmaq__close(p->vq);
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
	int e = 0;
	for (size_t i = 0; i < p->nr && !e; i++) {
		struct region *r = &p->r[i];
		/* Restore only what still carries our protection: pages the
		 * program unmapped or re-protected keep what it did. */
		struct gb_vma v;
		for (uint64_t a = r->start; a < r->end && !e; a = v.end) {
			int q = gb_vmaq__find(p->vq, a, true, &v);
			if (q == -ENOENT || (!q && v.start >= r->end))
				break;
			if (q)
				return q;
			uint64_t s = v.start > a ? v.start : a;
			uint64_t t = v.end < r->end ? v.end : r->end;
			if (v.prot == (r->orig_prot & ~PROT_EXEC))
				e = mprotect_in(p, tid, s, t - s, r->orig_prot, pending_sig);
		}
	}
	if (e)
		return e;
	p->armed = false;
	p->st.disarms++;
	return 0;
}

int gb_pagetrap__arm_on_resume(struct gb_pagetrap *p, pid_t tid, const struct user_regs_struct *r)
{
	if (p->armed)
		return 1;
	if (p->no_tramp)
		return 0;
	int e = load_regions(p);
	if (e)
		return e;
	if (p->nr != 1)
		return 0; /* one mprotect per trip */
	if (!p->tramp) {
		int sig = 0;
		p->tramp = gb_tramp__new(p->pid, tid, p->syscall_insn, &sig);
		if (!p->tramp || sig) {
			/* A signal arrived meanwhile: keep it simple, stop-based. */
			if (sig)
				kill(tid, sig);
			p->no_tramp = !p->tramp;
			return 0;
		}
	}
	struct region *g = &p->r[0];
	e = gb_tramp__launch(p->tramp, tid, r, SYS_mprotect, g->start, g->end - g->start,
			     (uint64_t)(g->orig_prot & ~PROT_EXEC));
	if (e)
		return e;
	p->armed = true;
	p->st.arms++;
	return 1;
}

void gb_pagetrap__settle(struct gb_pagetrap *p, pid_t tid)
{
	bool ran = false;
	if (gb_tramp__settle(p->tramp, tid, &ran) == 1 && !ran) {
		p->armed = false;
		p->st.arms--;
	}
}

void gb_pagetrap__release(struct gb_pagetrap *p, pid_t tid, int *pending_sig)
{
	if (!p->tramp)
		return;
	gb_tramp__unmap(p->tramp, tid, p->syscall_insn, pending_sig);
	gb_tramp__free(p->tramp);
	p->tramp = NULL;
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
	struct gb_vma v;
	bool ours = false;
	if (gb_vmaq__find(p->vq, rip, false, &v))
		return false;
	for (size_t i = 0; i < p->nr; i++)
		if (rip >= p->r[i].start && rip < p->r[i].end)
			ours = v.prot == (p->r[i].orig_prot & ~PROT_EXEC);
	if (ours)
		p->st.entries++;
	return ours;
}

int gb_pagetrap__fix_child(struct gb_pagetrap *p, pid_t child)
{
	int sig = 0, e = 0;
	for (size_t i = 0; p->armed && i < p->nr && !e; i++)
		e = mprotect_in(p, child, p->r[i].start, p->r[i].end - p->r[i].start,
				p->r[i].orig_prot, &sig);
	if (p->tramp && !e)
		gb_tramp__unmap(p->tramp, child, p->syscall_insn, &sig); /* its copy of the page */
	if (sig)
		kill(child, sig); /* re-queue what arrived meanwhile */
	return e;
}

void gb_pagetrap__stats(const struct gb_pagetrap *p, struct gb_pagetrap_stats *s) { *s = p->st; }
