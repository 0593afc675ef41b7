/* The patch trap's children (docs/trace.md "The patch trap"): a fork child
 * is moved out of the cache and gets the original bytes back, gs base 0 and
 * no cache; a vfork child, which shares the parent's memory, an area of its
 * own whose records are dropped.  The hook (patch_child) is trap/patch/trap.c's
 * child hook. */
#include <signal.h>
#include <sys/user.h>

#include "common/log.h"
#include "jit/jit.h"
#include "ptrace/regs.h"
#include "trace/engine_int.h"
#include "trace/jitmap.h"
#include "trap/patch/patch.h"

/* rip is right after the system call of a piece that makes one without
 * the lock (a recording block's, or a counting twin's: user/jit/twin.c):
 * its original instruction (the syscall at *pc). */
static bool after_ns_syscall(const struct patch_trap *pt, uint64_t rip, uint64_t *pc)
{
	struct gb_jit_loc loc;
	uint64_t off = rip - pt->map.addr;
	return gb_jit__locate(pt->j, rip, &loc) == 0 && (loc.ns == GB_JIT_NS_SYSCALL || loc.twin) && loc.pc &&
	       off >= 2 && off <= GB_JIT_CODE_SIZE && pt->map.view[off - 2] == 0x0f &&
	       pt->map.view[off - 1] == 0x05 && (*pc = loc.pc, true);
}

/* A vfork child shares our memory, patches and cache: it gets an area of
 * its own (a copy of its parent's: it may return into the cache from an
 * in-range vfork) whose stretches the drain drops, so what it runs in the
 * range until its exec or exit is not recorded, as under the other traps
 * (a child is let go untraced). */
static void vfork_child(struct patch_trap *pt, pid_t child, struct user_regs_struct *r)
{
	uint64_t a0 = gb_jit__tls(pt->j, 0);
	unsigned parent = (unsigned)((r->gs_base - a0) / GB_JIT_TLS_SIZE);
	int nk = r->gs_base < a0 || parent >= GB_JIT_TLS_COUNT ? -1 : patch_area_new(pt);
	if (nk < 0) {
		gb_warn("trace: vfork child %d shares its parent's area of the code cache: what it "
			"runs in the range is recorded as its parent's", child);
		return;
	}
	unsigned k = (unsigned)nk; /* (never given back: the child is let go) */
	gb_jit__area_clone(pt->j, k, parent);
	pt->area_of[k] = AREA_UNTRACED;
	r->gs_base = gb_jit__tls(pt->j, k);
	gb_regs_set(child, r);
}

/* A fork child, stopped: out of the cache, the original bytes, gs 0, the
 * cache unmapped (a vfork child: vfork_child). */
void patch_child(struct gb_trap *t, struct gb_engine *e, pid_t child, enum gb_trap_child ev)
{
	struct patch_trap *pt = (struct patch_trap *)t;
	struct user_regs_struct r;
	uint64_t sys;
	int sig = 0;
	if (ev == GB_CHILD_VFORK_DONE || !pt->written || gb_regs_get(child, &r))
		return;
	if (ev == GB_CHILD_VFORK) {
		vfork_child(pt, child, &r);
		return;
	}
	patch_write(pt, child, true); /* (first, as at the end: patch_teardown) */
	if (gb_jit__in_code(pt->j, r.rip) && after_ns_syscall(pt, r.rip, &sys))
		r.rip = r.rcx = sys + 2; /* (fork returned 0 in it) */
	else if (gb_jit__in_code(pt->j, r.rip))
		gb_warn("trace: forked child %d at 0x%llx in the code cache", child,
			(unsigned long long)r.rip);
	r.gs_base = 0;
	gb_regs_set(child, &r);
	if (gb_jitmap_unmap_safe(child, child, pt->map.addr, &sig))
		gb_warn("trace: forked child %d keeps a copy of the code cache", child);
	if (sig)
		kill(child, sig);
}
