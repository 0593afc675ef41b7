/* A thread stopped in the patch trap's cache put at its original
 * instruction boundary: see trap/patch/patch.h. */
#include <errno.h>
#include <sys/user.h>

#include "decode/plan.h"
#include "jit/jit.h"
#include "ptrace/regs.h"
#include "trace/cpu.h"
#include "trace/engine_int.h"
#include "trap/patch/patch.h"

static struct patch_thread *pth(struct gb_engine *e, size_t i) { return eng_trap_priv(e, i); }

/* Thread i (stopped, registers r) in the cache is put at its original
 * instruction boundary (gb_jit__unwind: its own registers, the lock
 * released if it held it, records of what it did not run taken back).
 * fault: it stopped at an instruction's copy for a fault that instruction
 * raised (put at it, its saved registers reloaded, its record kept).
 * 0, -ESRCH (it died), -EAGAIN (not in the cache's code). */
int patch_unwind(struct patch_trap *pt, struct gb_engine *e, size_t i,
		 struct user_regs_struct *r, const struct gb_stop *fault)
{
	struct gb_jit_loc loc;
	struct gb_jit_unwound u;
	pid_t tid = eng_tid(e, i);
	bool at = fault && gb_jit__locate(pt->j, r->rip, &loc) == 0 && loc.at_insn;
	if (at && loc.twin) { /* a counting twin's copy: its counts as it faulted */
		if (gb_jit__unwind(pt->j, r, &pt->cur, &u))
			return -EAGAIN;
		patch_count_fault(pt, e, i, r, fault, pth(e, i)->k);
		return gb_regs_set(tid, r) ? -ESRCH : 0;
	}
	if (at) {
		for (unsigned k = 0; k < GB_REG_COUNT; k++)
			if (loc.restore & (1u << k))
				*gb_regs_field(r, k) = gb_jit__saved(pt->j, k);
		r->rip = loc.pc;
		gb_jit__lock_release(pt->j); /* blocks run holding it */
		return gb_regs_set(tid, r) ? -ESRCH : 0;
	}
	if (gb_jit__unwind(pt->j, r, &pt->cur, &u))
		return -EAGAIN;
	if (u.late_recs && pt->has_held) {
		pt->has_held = false; /* the record it took back (the ring's last) */
		u.late_recs--;
	}
	pt->late += u.late_recs;
	if (u.recorded) {
		pth(e, i)->skip = true;
		pth(e, i)->skip_pc = u.pc;
	}
	return gb_regs_set(tid, r) ? -ESRCH : 0;
}
