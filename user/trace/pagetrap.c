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
#include "probe/protwatch.h"
#include "trace/tramp.h"

#ifndef SEGV_ACCERR
#define SEGV_ACCERR 2
#endif

/* One page of the range: the protection the program gave it (what it has
 * when we are not trapping it), and whether our PROT_EXEC-less copy of that
 * protection is on it now. */
struct page {
	int orig;              /* PROT_*; -1 = not mapped */
	bool ours;
};

struct gb_pagetrap {
	pid_t pid;
	uint64_t start, end;   /* [start, end) page-aligned cover of the range */
	struct page *pg;       /* (end - start) / 4096 pages */
	size_t npg;
	bool armed;            /* every executable page carries our protection */
	uint64_t syscall_insn;
	struct gb_vmaq *vq;    /* VMA queries on the process (PROCMAP_QUERY) */
	struct gb_tramp *tramp;  /* re-protect on the way out without a stop */
	bool no_tramp;           /* mapping the trampoline failed once */
	size_t inflight_k, inflight_kend;  /* pages the trampoline is protecting */
	struct gb_protwatch *watch;  /* the program's own mprotect/munmap/... of the pages */
	struct gb_pagetrap_stats st;
};

#define PG(p, k) ((p)->start + (uint64_t)(k) * 4096)

static bool trappable(const struct page *g) { return g->orig >= 0 && (g->orig & PROT_EXEC); }

/* Read page k's current protection from the process (-1: unmapped). */
static int current_prot(struct gb_pagetrap *p, size_t k)
{
	struct gb_vma v;
	if (gb_vmaq__find(p->vq, PG(p, k), false, &v))
		return -1;
	return v.prot;
}

static void recompute_armed(struct gb_pagetrap *p)
{
	bool all = true, any = false;
	for (size_t k = 0; k < p->npg; k++)
		if (trappable(&p->pg[k])) {
			any = true;
			all &= p->pg[k].ours;
		}
	p->armed = any && all;
}

struct gb_pagetrap *gb_pagetrap__new(pid_t pid, uint64_t start, uint64_t end)
{
	struct gb_pagetrap *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->start = start & ~0xfffull;
	/* User space ends below 2^47: clamp so the page count cannot wrap. */
	if (end > 0x7fffffffffffull)
		end = 0x7fffffffffffull;
	if (p->start > end) {
		gb_pagetrap__free(p);
		return NULL;
	}
	p->end = (end | 0xfffull) + 1;
	p->npg = (size_t)((p->end - p->start) / 4096);
	p->pg = calloc(p->npg, sizeof(*p->pg));
	p->vq = gb_vmaq__open(pid);
	bool any = false;
	for (size_t k = 0; p->pg && p->vq && k < p->npg; k++) {
		p->pg[k].orig = current_prot(p, k);
		any |= trappable(&p->pg[k]);
	}
	if (!any) {
		gb_info("range 0x%llx-0x%llx: not in an executable mapping of pid %d",
			(unsigned long long)start, (unsigned long long)end, pid);
		gb_pagetrap__free(p);
		return NULL;
	}
	p->syscall_insn = gb_inject_find_syscall(pid, p->start, p->end);
	if (!p->syscall_insn) {
		gb_info("pid %d: no syscall instruction outside the range to inject mprotect through",
			pid);
		gb_pagetrap__free(p);
		return NULL;
	}
	/* Without the watcher a program changing the range's protections
	 * itself goes unseen (its own line says why). */
	struct gb_protwatch_opts wo = {
		.tgid = pid, .start = p->start, .end = p->end, .signo = GB_PAGETRAP_SIGNAL,
		.skip_ip = { p->syscall_insn + 2, GB_TRAMP_ADDR + 2 },
	};
	p->watch = gb_protwatch__new(&wo);
	return p;
}

void gb_pagetrap__free(struct gb_pagetrap *p)
{
	if (!p)
		return;
	gb_protwatch__free(p->watch);
	gb_tramp__free(p->tramp);
	gb_vmaq__close(p->vq);
	free(p->pg);
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

/* Runs of pages [k, *kend) that need the same change: arming (want_ours)
 * takes trappable pages not yet ours; disarming takes pages that are ours
 * and (checked against the process) still carry our protection. */
static bool next_run(struct gb_pagetrap *p, size_t *k, size_t *kend, bool want_ours)
{
	for (; *k < p->npg; (*k)++) {
		struct page *g = &p->pg[*k];
		if (want_ours ? (trappable(g) && !g->ours) : g->ours)
			break;
	}
	if (*k == p->npg)
		return false;
	int orig = p->pg[*k].orig;
	*kend = *k + 1;
	while (*kend < p->npg && p->pg[*kend].orig == orig &&
	       (want_ours ? !p->pg[*kend].ours : p->pg[*kend].ours))
		(*kend)++;
	return true;
}

int gb_pagetrap__arm(struct gb_pagetrap *p, pid_t tid, int *pending_sig)
{
	size_t k = 0, kend;
	bool did = false;
	while (next_run(p, &k, &kend, true)) {
		did = true;
		int orig = p->pg[k].orig;
		int e = mprotect_in(p, tid, PG(p, k), (kend - k) * 4096, orig & ~PROT_EXEC, pending_sig);
		if (e)
			return e;
		for (; k < kend; k++)
			p->pg[k].ours = true;
	}
	if (did)
		p->st.arms++;
	recompute_armed(p);
	return 0;
}

int gb_pagetrap__disarm(struct gb_pagetrap *p, pid_t tid, int *pending_sig)
{
	size_t k = 0, kend;
	while (next_run(p, &k, &kend, false)) {
		/* A page the program re-protected or unmapped behind our back
		 * keeps what it did (and is no longer ours); the others are given
		 * back their protection, one mprotect per contiguous stretch. */
		size_t from = k;
		for (size_t j = k; j <= kend; j++) {
			bool ok = j < kend && current_prot(p, j) == (p->pg[j].orig & ~PROT_EXEC);
			if (ok)
				continue;
			if (j > from) {
				int e = mprotect_in(p, tid, PG(p, from), (j - from) * 4096, p->pg[from].orig,
						    pending_sig);
				if (e)
					return e;
				for (size_t x = from; x < j; x++)
					p->pg[x].ours = false;
			}
			if (j < kend) {
				p->pg[j].ours = false;
				p->pg[j].orig = current_prot(p, j);
			}
			from = j + 1;
		}
		k = kend;
	}
	p->armed = false;
	p->st.disarms++;
	return 0;
}

void gb_pagetrap__program_changed(struct gb_pagetrap *p, uint64_t addr, uint64_t len, int prot)
{
	uint64_t a = addr & ~0xfffull, b = addr + len;
	for (uint64_t x = a > p->start ? a : p->start; x < b && x < p->end; x += 4096) {
		struct page *g = &p->pg[(x - p->start) / 4096];
		g->orig = prot == -2 ? current_prot(p, (size_t)((x - p->start) / 4096)) : prot;
		g->ours = false;
	}
	recompute_armed(p);
}

int gb_pagetrap__arm_on_resume(struct gb_pagetrap *p, pid_t tid, const struct user_regs_struct *r)
{
	size_t k = 0, kend, k2, k2end;
	if (p->armed)
		return 1;
	if (p->no_tramp || !next_run(p, &k, &kend, true))
		return 0;
	k2 = kend;
	if (next_run(p, &k2, &k2end, true))
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
	int orig = p->pg[k].orig;
	int e = gb_tramp__launch(p->tramp, tid, r, SYS_mprotect, PG(p, k), (kend - k) * 4096,
				 (uint64_t)(orig & ~PROT_EXEC));
	if (e)
		return e;
	for (size_t j = k; j < kend; j++)
		p->pg[j].ours = true;
	p->inflight_k = k;
	p->inflight_kend = kend;
	p->st.arms++;
	recompute_armed(p);
	return 1;
}

void gb_pagetrap__settle(struct gb_pagetrap *p, pid_t tid)
{
	bool ran = false;
	if (gb_tramp__settle(p->tramp, tid, &ran) == 1 && !ran) {
		/* Its mprotect never ran: those pages are not ours after all. */
		for (size_t j = p->inflight_k; j < p->inflight_kend; j++)
			p->pg[j].ours = false;
		p->st.arms--;
		recompute_armed(p);
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

static void apply_change(void *ctx, const struct gb_prot_change *c)
{
	struct gb_pagetrap *p = ctx;
	if (c->tid == 0 && c->nr == 0) /* records were lost: re-read everything */
		gb_pagetrap__program_changed(p, p->start, p->end - p->start, GB_PROT_REREAD);
	else
		gb_pagetrap__program_changed(p, c->addr, c->len, c->prot);
}

bool gb_pagetrap__claim_signal(struct gb_pagetrap *p, pid_t tid, int sig)
{
	if (!p->watch || sig != GB_PAGETRAP_SIGNAL || !gb_protwatch__claim(p->watch, tid))
		return false;
	gb_protwatch__drain(p->watch, apply_change, p);
	return true;
}

bool gb_pagetrap__armed(const struct gb_pagetrap *p) { return p->armed; }

bool gb_pagetrap__writable(const struct gb_pagetrap *p)
{
	for (size_t k = 0; k < p->npg; k++)
		if (trappable(&p->pg[k]) && (p->pg[k].orig & PROT_WRITE))
			return true;
	return false;
}

bool gb_pagetrap__touched(const struct gb_pagetrap *p)
{
	for (size_t k = 0; k < p->npg; k++)
		if (p->pg[k].ours)
			return true;
	return false;
}

static struct page *page_of(const struct gb_pagetrap *p, uint64_t a)
{
	if (a < p->start || a >= p->end)
		return NULL;
	return &p->pg[(a - p->start) / 4096];
}

bool gb_pagetrap__covers(const struct gb_pagetrap *p, uint64_t pc)
{
	struct page *g = page_of(p, pc);
	return g && trappable(g);
}

bool gb_pagetrap__is_entry(struct gb_pagetrap *p, const struct gb_stop *st, uint64_t rip)
{
	struct page *g = page_of(p, rip);
	if (!g || !g->ours || st->kind != GB_STOP_SIGNAL || st->sig != SIGSEGV ||
	    st->code != SEGV_ACCERR || st->fault_addr != rip)
		return false;
	/* Still our protection?  If the program made the page non-executable
	 * itself (unseen: no watcher), this fault is its own. */
	int cur = current_prot(p, (size_t)((rip - p->start) / 4096));
	if (cur != (g->orig & ~PROT_EXEC)) {
		g->ours = false;
		g->orig = cur;
		recompute_armed(p);
		return false;
	}
	p->st.entries++;
	return true;
}

int gb_pagetrap__fix_child(struct gb_pagetrap *p, pid_t child)
{
	int sig = 0, e = 0;
	for (size_t k = 0; k < p->npg && !e; k++)
		if (p->pg[k].ours)
			e = mprotect_in(p, child, PG(p, k), 4096, p->pg[k].orig, &sig);
	if (p->tramp && !e)
		gb_tramp__unmap(p->tramp, child, p->syscall_insn, &sig); /* its copy of the page */
	if (sig)
		kill(child, sig); /* re-queue what arrived meanwhile */
	return e;
}

void gb_pagetrap__stats(const struct gb_pagetrap *p, struct gb_pagetrap_stats *s) { *s = p->st; }
