/* The patch trap's end, the part a SIGKILL of the worker must not make
 * harmful (docs/trace.md "Ending"): see trap/patch/patch.h. */
#include <stdlib.h>
#include <sys/user.h>

#include "common/guard.h"
#include "common/log.h"
#include "ptrace/mem.h"

#include "ptrace/regs.h"
#include "trace/engine_int.h"
#include "trap/probes/probes.h"
#include "trap/patch/patch.h"

ssize_t patch_gs_zero(struct gb_engine *e)
{
	ssize_t via = -1;
	for (size_t i = 0; i < e->t->nthreads; i++) {
		struct user_regs_struct r;
		pid_t tid = eng_tid(e, i);
		if (eng_state(e, i) != T_STOPPED || gb_regs_get(tid, &r))
			continue;
		r.gs_base = 0;
		if (gb_regs_set(tid, &r) == 0 && via < 0)
			via = (ssize_t)i;
	}
	return via;
}

void patch_write(struct patch_trap *pt, pid_t pid, bool orig)
{
	for (size_t k = 0; k < pt->plan.n; k++) {
		const struct gb_patch *p = &pt->plan.v[k];
		if (!orig && pid == pt->pid && p->why == GB_PATCH_OK) /* (common/guard.h) */
			gb_guard_undo_add(pid, p->addr, p->orig, GB_PATCH_LEN);
		if (p->why == GB_PATCH_OK &&
		    gb_mem_write(pid, p->addr, orig ? p->orig : p->bytes, GB_PATCH_LEN) != GB_PATCH_LEN)
			gb_warn("trace: pid %d: cannot write the %s bytes at 0x%llx", pid,
				orig ? "original" : "patch", (unsigned long long)p->addr);
		if (orig && pid == pt->pid && p->why == GB_PATCH_OK)
			gb_guard_test_point("end-restore"); /* (test only: common/guard.h) */
	}
	if (orig && pid == pt->pid) {
		gb_guard_test_point("end-restored");
		gb_guard_undo_clear();
		gb_guard_test_point("end-cleared");
	}
}

/* gebpf's own view of it, after the teardown (or a set-up that failed). */
void patch_free(struct gb_trap *t)
{
	struct patch_trap *pt = (struct patch_trap *)t;
	gb_probes__free(pt->probes); /* (every uprobe gone) */
	gb_patch_plan_free(&pt->plan);
	gb_jit__free(pt->j);
	gb_jitmap_drop(&pt->map);
	free(pt->code);
	if (pt->instead)
		gb_trap_free(pt->instead);
	free(pt);
}
