/* The patch trap's end, the part a SIGKILL of the worker must not make
 * harmful (docs/trace.md "Ending"): see trap_patch.h. */
#include <sys/user.h>

#include "ptrace/regs.h"
#include "trace/engine_int.h"
#include "trace/trap_patch.h"

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
