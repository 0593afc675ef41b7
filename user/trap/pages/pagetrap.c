#include "trap/pages/pagetrap.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "common/bound.h"
#include "common/grow.h"
#include "common/log.h"
#include "common/page.h"
#include "probe/protwatch.h"
#include "ptrace/inject.h"
#include "ptrace/maps.h"
#include "ptrace/tramp.h"

#ifndef SEGV_ACCERR
#define SEGV_ACCERR 2
#endif

/* The range's executable code as extents: stretches of pages that the
 * program gave one protection (with PROT_EXEC), and whether our
 * PROT_EXEC-less copy of it is on them now.  Built from the VMAs that
 * intersect the range (one query per VMA), so memory and work follow the
 * mapped code, whatever the range's size.  Sorted, never overlapping. */
struct ext {
	uint64_t a, b;         /* [a, b), page aligned */
	int orig;              /* PROT_* the program gave it (PROT_EXEC among them) */
	bool ours;
};

struct gb_pagetrap {
	pid_t pid;
	uint64_t start, end;   /* [start, end) page-aligned cover of the range */
	struct ext *x;
	size_t nx, capx;
	bool armed;            /* every extent carries our protection */
	uint64_t syscall_insn;
	struct gb_vmaq *vq;    /* VMA queries on the process (PROCMAP_QUERY) */
	struct gb_tramp *tramp;  /* re-protect on the way out without a stop */
	bool no_tramp;           /* mapping the trampoline failed once */
	uint64_t inflight_a, inflight_b;  /* what the trampoline is protecting */
	struct gb_protwatch *watch;  /* the program's own mprotect/munmap/... of the pages */
	struct gb_pagetrap_stats st;
};

/* An x86-64 instruction is at most 15 bytes long. */
#define MAX_INSN 15
#define MAX_ERRNO 4095

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

static int add_ext(struct gb_pagetrap *p, uint64_t a, uint64_t b, int orig)
{
	if (a >= b || orig < 0 || !(orig & PROT_EXEC))
		return 0;
	if (GB_GROW(&p->x, &p->capx, p->nx + 1))
		return -ENOMEM;
	/* Insert in order (the list is short: a few VMAs). */
	size_t i = p->nx;
	while (i > 0 && p->x[i - 1].a > a) {
		p->x[i] = p->x[i - 1];
		i--;
	}
	p->x[i] = (struct ext){ a, b, orig, false };
	p->nx++;
	return 0;
}

/* The extents of [a, b) as the process has them now (the trampoline page,
 * ours, is never one). */
static int read_span(struct gb_pagetrap *p, uint64_t a, uint64_t b)
{
	struct gb_vma v;
	while (a < b && gb_vmaq__find(p->vq, a, true, &v) == 0 && v.start < b) {
		uint64_t lo = max_u64(a, v.start), hi = min_u64(b, v.end);
		if (lo < GB_TRAMP_ADDR + GB_PAGE_SIZE && hi > GB_TRAMP_ADDR) {
			int e = add_ext(p, lo, GB_TRAMP_ADDR, v.prot);
			if (!e)
				e = add_ext(p, GB_TRAMP_ADDR + GB_PAGE_SIZE, hi, v.prot);
			if (e)
				return e;
		} else if (add_ext(p, lo, hi, v.prot)) {
			return -ENOMEM;
		}
		if (v.end <= a)
			break;
		a = v.end;
	}
	return 0;
}

/* Forget what is known of [a, b) (cut out of the extents). */
static int cut_span(struct gb_pagetrap *p, uint64_t a, uint64_t b)
{
	size_t n = p->nx;
	for (size_t i = 0; i < n; i++) {
		struct ext *x = &p->x[i];
		if (x->b <= a || x->a >= b)
			continue;
		struct ext tail = *x;
		if (x->a < a) {
			x->b = a;
			if (tail.b > b) {
				/* A hole in the middle: the right part is a new extent. */
				int e = add_ext(p, b, tail.b, tail.orig);
				if (e)
					return e;
				p->x[i + 1].ours = tail.ours; /* it sorts right after */
			}
		} else if (x->b > b) {
			x->a = b;
		} else {
			x->a = x->b; /* emptied: dropped below */
		}
	}
	size_t k = 0;
	for (size_t i = 0; i < p->nx; i++)
		if (p->x[i].a < p->x[i].b)
			p->x[k++] = p->x[i];
	p->nx = k;
	return 0;
}

static struct ext *ext_of(const struct gb_pagetrap *p, uint64_t a)
{
	size_t i = GB_UPPER(p->x, p->nx, a, a);
	return i && a < p->x[i - 1].b ? &p->x[i - 1] : NULL;
}

/* The process's current protection at a (-1: unmapped). */
static int current_prot(struct gb_pagetrap *p, uint64_t a, uint64_t *vend)
{
	struct gb_vma v;
	if (gb_vmaq__find(p->vq, a, true, &v))
		return *vend = UINT64_MAX, -1;
	if (v.start > a)
		return *vend = v.start, -1;
	*vend = v.end;
	return v.prot;
}

static void recompute_armed(struct gb_pagetrap *p)
{
	bool all = p->nx > 0;
	for (size_t k = 0; k < p->nx; k++)
		all &= p->x[k].ours;
	p->armed = all;
}

static int avoid_ext(void *ctx, uint64_t a)
{
	return ext_of(ctx, a) != NULL;
}

struct gb_pagetrap *gb_pagetrap__new(pid_t pid, uint64_t start, uint64_t end)
{
	struct gb_pagetrap *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->start = gb_page_down(start);
	/* User space ends below 2^47: clamp so the page count cannot wrap. */
	if (end > 0x7fffffffffffull)
		end = 0x7fffffffffffull;
	if (p->start > end) {
		gb_pagetrap__free(p);
		return NULL;
	}
	p->end = gb_page_down(end) + GB_PAGE_SIZE;
	p->vq = gb_vmaq__open(pid);
	if (!p->vq || read_span(p, p->start, p->end) || !p->nx) {
		if (p->vq)
			gb_info("range 0x%llx-0x%llx: not in an executable mapping of pid %d",
				(unsigned long long)start, (unsigned long long)end, pid);
		gb_pagetrap__free(p);
		return NULL;
	}
	p->syscall_insn = gb_inject_find_syscall(pid, avoid_ext, p);
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
	free(p->x);
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
	return ret < 0 && ret >= -MAX_ERRNO ? (int)ret : 0;
}

/* Runs of extents [k, *kend) that one mprotect can change: arming
 * (want_ours) takes extents not yet ours, disarming those that are;
 * contiguous, with the same protection. */
static bool next_run(struct gb_pagetrap *p, size_t *k, size_t *kend, bool want_ours)
{
	for (; *k < p->nx; (*k)++)
		if (p->x[*k].ours != want_ours)
			break;
	if (*k == p->nx)
		return false;
	*kend = *k + 1;
	while (*kend < p->nx && p->x[*kend].orig == p->x[*k].orig && p->x[*kend].a == p->x[*kend - 1].b &&
	       p->x[*kend].ours != want_ours)
		(*kend)++;
	return true;
}

static void set_ours(struct gb_pagetrap *p, uint64_t a, uint64_t b, bool ours)
{
	for (size_t k = 0; k < p->nx; k++)
		if (p->x[k].a >= a && p->x[k].b <= b)
			p->x[k].ours = ours;
}

int gb_pagetrap__arm(struct gb_pagetrap *p, pid_t tid, int *pending_sig)
{
	size_t k = 0, kend;
	bool did = false;
	while (next_run(p, &k, &kend, true)) {
		did = true;
		uint64_t a = p->x[k].a, b = p->x[kend - 1].b;
		int e = mprotect_in(p, tid, a, b - a, p->x[k].orig & ~PROT_EXEC, pending_sig);
		if (e)
			return e;
		set_ours(p, a, b, true);
		k = kend;
	}
	if (did)
		p->st.arms++;
	recompute_armed(p);
	return 0;
}

int gb_pagetrap__disarm(struct gb_pagetrap *p, pid_t tid, int *pending_sig)
{
	/* Stretches the program re-protected or unmapped behind our back keep
	 * what it did (re-read below); the others get their protection back,
	 * one mprotect per stretch that still carries ours. */
	uint64_t reread[16][2];
	size_t nre = 0;
	bool reread_all = false;
	for (size_t k = 0; k < p->nx; k++) {
		struct ext *x = &p->x[k];
		if (!x->ours)
			continue;
		uint64_t a = x->a, b = x->b, vend;
		int orig = x->orig;
		while (a < b) {
			int cur = current_prot(p, a, &vend);
			uint64_t to = min_u64(b, vend);
			if (cur == (orig & ~PROT_EXEC)) {
				int e = mprotect_in(p, tid, a, to - a, orig, pending_sig);
				if (e)
					return e;
			} else if (nre < 16) {
				reread[nre][0] = a;
				reread[nre++][1] = to;
			} else {
				reread_all = true;
			}
			a = to;
		}
		x->ours = false;
	}
	for (size_t i = 0; i < nre && !reread_all; i++)
		gb_pagetrap__program_changed(p, reread[i][0], reread[i][1] - reread[i][0], GB_PROT_REREAD);
	if (reread_all)
		gb_pagetrap__program_changed(p, p->start, p->end - p->start, GB_PROT_REREAD);
	p->armed = false;
	p->st.disarms++;
	return 0;
}

void gb_pagetrap__program_changed(struct gb_pagetrap *p, uint64_t addr, uint64_t len, int prot)
{
	uint64_t a = max_u64(gb_page_down(addr), p->start);
	uint64_t b = min_u64(gb_page_up(addr + len), p->end);
	if (a >= b)
		return;
	int e = cut_span(p, a, b);
	if (!e)
		e = prot == GB_PROT_REREAD ? read_span(p, a, b) : add_ext(p, a, b, prot);
	if (e)
		gb_err("pid %d: page trap: %s", p->pid, strerror(-e)); /* nothing trapped there */
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
	uint64_t a = p->x[k].a, b = p->x[kend - 1].b;
	int e = gb_tramp__launch(p->tramp, tid, r, SYS_mprotect, a, b - a,
				 (uint64_t)(p->x[k].orig & ~PROT_EXEC));
	if (e)
		return e;
	set_ours(p, a, b, true);
	p->inflight_a = a;
	p->inflight_b = b;
	p->st.arms++;
	recompute_armed(p);
	return 1;
}

void gb_pagetrap__settle(struct gb_pagetrap *p, pid_t tid)
{
	bool ran = false;
	if (gb_tramp__settle(p->tramp, tid, &ran) == 1 && !ran) {
		/* Its mprotect never ran: those pages are not ours after all. */
		set_ours(p, p->inflight_a, p->inflight_b, false);
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
	for (size_t k = 0; k < p->nx; k++)
		if (p->x[k].orig & PROT_WRITE)
			return true;
	return false;
}

bool gb_pagetrap__has_tramp(const struct gb_pagetrap *p)
{
	return p->tramp != NULL;
}

bool gb_pagetrap__touched(const struct gb_pagetrap *p)
{
	for (size_t k = 0; k < p->nx; k++)
		if (p->x[k].ours)
			return true;
	return false;
}

bool gb_pagetrap__covers(const struct gb_pagetrap *p, uint64_t pc)
{
	if (ext_of(p, pc))
		return true;
	/* An instruction that starts on an untrapped page may end on a
	 * trapped one: within MAX_INSN - 1 bytes of an extent, pc counts as on
	 * the pages (the owner steps it; stepping a few more is harmless). */
	struct ext *next = ext_of(p, gb_page_down(pc + MAX_INSN - 1));
	return next && next->a > pc;
}

bool gb_pagetrap__is_fetch_fault(const struct gb_pagetrap *p, const struct gb_stop *st, uint64_t rip)
{
	if (st->kind != GB_STOP_SIGNAL || st->sig != SIGSEGV || st->code != SEGV_ACCERR)
		return false;
	/* The fetch of the instruction at rip faulted at rip, or where it
	 * crosses onto the next page (that page's first byte). */
	uint64_t f = st->fault_addr;
	if (f != rip && !(f > rip && f < rip + MAX_INSN && f == gb_page_down(f)))
		return false;
	return ext_of(p, f) != NULL;
}

bool gb_pagetrap__is_entry(struct gb_pagetrap *p, const struct gb_stop *st, uint64_t rip)
{
	if (!gb_pagetrap__is_fetch_fault(p, st, rip))
		return false;
	struct ext *x = ext_of(p, st->fault_addr);
	if (!x->ours)
		return false;
	/* Still our protection?  If the program made the page non-executable
	 * itself (unseen: no watcher), this fault is its own. */
	uint64_t vend;
	int cur = current_prot(p, st->fault_addr, &vend);
	if (cur != (x->orig & ~PROT_EXEC)) {
		gb_pagetrap__program_changed(p, st->fault_addr, GB_PAGE_SIZE, GB_PROT_REREAD);
		return false;
	}
	p->st.entries++;
	return true;
}

int gb_pagetrap__fix_child(struct gb_pagetrap *p, pid_t child)
{
	int sig = 0, e = 0;
	for (size_t k = 0; k < p->nx && !e; k++)
		if (p->x[k].ours)
			e = mprotect_in(p, child, p->x[k].a, p->x[k].b - p->x[k].a, p->x[k].orig, &sig);
	if (p->tramp && !e)
		gb_tramp__unmap(p->tramp, child, p->syscall_insn, &sig); /* its copy of the page */
	if (sig)
		kill(child, sig); /* re-queue what arrived meanwhile */
	return e;
}

void gb_pagetrap__stats(const struct gb_pagetrap *p, struct gb_pagetrap_stats *s) { *s = p->st; }
