/* The patch trap's asynchronous signals that stop a thread while it runs
 * the copies of the instructions a patch covers (docs/trace.md "The patch
 * trap", "Signals"): see trap/patch/patch.h.
 *
 * Put back at its original instruction, such a thread would stand inside
 * the patch's 5 bytes, which hold the jump's tail.  A handler that returns
 * there by rt_sigreturn is sent back into the cache (the watch of
 * trap/patch/trap.c), but one that returns some other way runs the tail: Go's
 * asynchronous preemption (SIGURG every 10 ms) has its handler make the
 * thread call asyncPreempt, which later returns to the interrupted pc with a
 * plain ret, natively.  An asynchronous signal may be taken at any later
 * instruction boundary, so it is first put off: the thread goes on in the
 * cache (out of the patch's few straight-line instructions within
 * microseconds) and the next idle sends it the same signal again, taken
 * where it is then, with its first siginfo.  A signal that comes faster than
 * that round trip (a 100 us timer: the thread, resumed, stops again with the
 * next one before its first instruction) is put off at most
 * PATCH_LATER_TRIES times in a row; then it is taken at the instruction's
 * copy in the patch's entry block (its native copy: owner.c, relocated), so
 * that whatever way the handler returns the thread goes on in the original
 * code after the patch, unrecorded until its next entry.  No single step,
 * no mask change: nothing of it can be left behind if gebpf dies. */
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <unistd.h>

#include "common/log.h"
#include "ptrace/regs.h"
#include "trace/engine_int.h"
#include "trap/patch/patch.h"

#define PATCH_LATER_TRIES 3

static struct patch_thread *pth(struct gb_engine *e, size_t i) { return eng_trap_priv(e, i); }

bool patch_later(struct patch_trap *pt, struct gb_engine *e, size_t i, const struct gb_stop *st,
		 const struct user_regs_struct *r)
{
	struct patch_thread *th = pth(e, i);
	struct gb_jit_loc loc;
	uint64_t b;
	if (th->later_n >= PATCH_LATER_TRIES || gb_jit__locate(pt->j, r->rip, &loc) || !loc.pc ||
	    !gb_patch_inside(&pt->plan, loc.pc, &b))
		return false;
	if (!th->later_sig && ptrace(PTRACE_GETSIGINFO, eng_tid(e, i), 0, &th->later_si))
		return false;
	th->later_sig = st->sig;
	th->later_sent = false;
	th->later_n++;
	pt->later++;
	return true;
}

void patch_later_resend(struct patch_trap *pt, struct gb_engine *e)
{
	for (size_t i = 0; i < e->t->nthreads; i++) {
		struct patch_thread *th = pth(e, i);
		if (!th->later_sig || th->later_sent || eng_state(e, i) != T_NATIVE)
			continue;
		th->later_sent = true;
		if (syscall(SYS_tgkill, pt->pid, eng_tid(e, i), th->later_sig))
			th->later_sig = 0; /* (gone) */
	}
}

void patch_later_arrived(struct gb_engine *e, size_t i, const struct gb_stop *st)
{
	struct patch_thread *th = pth(e, i);
	if (st->kind != GB_STOP_SIGNAL || !th->later_sent || st->sig != th->later_sig)
		return;
	ptrace(PTRACE_SETSIGINFO, eng_tid(e, i), 0, &th->later_si); /* (its own, not tgkill's) */
	th->later_sig = 0;
	th->later_sent = false;
}

bool patch_later_taken(struct gb_engine *e, size_t i)
{
	bool due = pth(e, i)->later_n >= PATCH_LATER_TRIES;
	pth(e, i)->later_n = 0;
	return due;
}

void patch_later_end(struct gb_engine *e)
{
	for (size_t i = 0; i < e->t->nthreads; i++) {
		struct patch_thread *th = pth(e, i);
		if (th->later_sig && !th->later_sent && !e->t->threads[i].pending_sig)
			e->t->threads[i].pending_sig = th->later_sig; /* (delivered at the detach) */
		th->later_sig = 0;
	}
}

bool patch_later_native(struct patch_trap *pt, struct gb_engine *e, size_t i,
			struct user_regs_struct *r)
{
	uint64_t b, at;
	if (!gb_patch_inside(&pt->plan, r->rip, &b) || !(at = gb_jit__native_at(pt->j, r->rip)))
		return false;
	r->rip = at;
	if (gb_regs_set(eng_tid(e, i), r))
		return false;
	pt->later_native++;
	return true;
}
