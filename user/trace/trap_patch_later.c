/* The patch trap's asynchronous signals that stop a thread while it runs
 * the copies of the instructions a patch covers (docs/trace.md "The patch
 * trap", "Signals"): see trap_patch.h.
 *
 * Put back at its original instruction, such a thread would stand inside
 * the patch's 5 bytes, which hold the jump's tail.  A handler that returns
 * there by rt_sigreturn is sent back into the cache (the watch of
 * trap_patch.c), but one that returns some other way runs the tail: Go's
 * asynchronous preemption (SIGURG every 10 ms) has its handler make the
 * thread call asyncPreempt, which later returns to the interrupted pc with a
 * plain ret, natively.  An asynchronous signal may be taken at any later
 * instruction boundary, so the signal is not delivered there.  Before the
 * stopped threads run again (the trap's before_run), the thread is
 * single-stepped (gb_step) out of the patch's few straight-line copies, a
 * few host instructions, and takes the signal there, with its first
 * siginfo.  Let go instead, it went on in the cache only by luck: its
 * stops came with that same signal again and again (a 100 us timer, and
 * gebpf's way from the stop back to the resume took longer), so it ran no
 * instruction, and after PATCH_LATER_MAX stops it was taken inside the
 * patch (pt_preempt: SIGSEGV in 3 traces of 20).  Where it cannot be
 * stepped out (a system call ahead, which may wait, or more than
 * PATCH_STEP_MAX steps), it goes on in the cache, and at the next idle the
 * same signal is sent to it again and taken where it is then.  At most
 * PATCH_LATER_MAX times in a row; then it is taken where the thread is. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <unistd.h>

#include "common/log.h"
#include "ptrace/regs.h"
#include "ptrace/step.h"
#include "trace/engine_int.h"
#include "trace/trap_patch.h"

#define PATCH_LATER_MAX 50
#define PATCH_STEP_MAX 256   /* host instructions (pt_preempt's: 4 to 7) */

static struct patch_thread *pth(struct gb_engine *e, size_t i) { return eng_trap_priv(e, i); }

bool patch_later(struct patch_trap *pt, struct gb_engine *e, size_t i, const struct gb_stop *st,
		 const struct user_regs_struct *r)
{
	struct patch_thread *th = pth(e, i);
	struct gb_jit_loc loc;
	uint64_t b;
	if (th->later_n >= PATCH_LATER_MAX || gb_jit__locate(pt->j, r->rip, &loc) || !loc.pc ||
	    !gb_patch_inside(&pt->plan, loc.pc, &b))
		return false;
	if (!th->later_sig && ptrace(PTRACE_GETSIGINFO, eng_tid(e, i), 0, &th->later_si))
		return false;
	th->later_sig = st->sig;
	th->later_step = true;
	th->later_sent = false;
	th->later_n++;
	pt->later++;
	return true;
}

/* Is the thread at rip out of every patch's copied instructions (out of
 * the cache: at an original boundary an exit jumped to)? */
static bool out_of_patches(struct patch_trap *pt, uint64_t rip)
{
	struct gb_jit_loc loc;
	uint64_t b;
	if (!gb_jit__in_code(pt->j, rip))
		return true;
	/* (pc 0: a shared routine, whose way back may still be inside) */
	return gb_jit__locate(pt->j, rip, &loc) == 0 && loc.pc && !gb_patch_inside(&pt->plan, loc.pc, &b);
}

/* A system call next (gebpf's view of the cache's code): never stepped
 * over (it may wait, for the ring's consumer among others: gebpf). */
static bool at_syscall(struct patch_trap *pt, uint64_t rip)
{
	return rip + 2 <= pt->map.addr + GB_JIT_CODE_SIZE &&
	       !memcmp(pt->map.view + (rip - pt->map.addr), "\x0f\x05", 2);
}

struct step_ctx {
	struct gb_engine *e;
	size_t i;
};

static void step_event(void *ctx, const struct gb_stop *st)
{
	struct step_ctx *c = ctx;
	eng_event(c->e, c->i, st);
}

/* Thread i's signal mask with sig blocked (true), or as it was. */
static bool hold(pid_t tid, int sig, uint64_t *was, bool on)
{
	uint64_t m;
	if (!on)
		return !ptrace(PTRACE_SETSIGMASK, tid, sizeof(*was), was);
	if (ptrace(PTRACE_GETSIGMASK, tid, sizeof(m), &m))
		return false;
	*was = m;
	m |= 1ull << (sig - 1);
	return !ptrace(PTRACE_SETSIGMASK, tid, sizeof(m), &m);
}

/* Thread i, stopped where its signal found it: stepped out of the patch's
 * copies, it takes the signal there; else it is left to the resend (a stop
 * of another kind met on the way goes to the engine).
 * While it is stepped the signal is blocked, else a timer's next one came
 * at a resume before the step's instruction (pt_preempt: at 7 of 14 steps,
 * 27 of 32 at worst), and it stays pending now.  Nothing else can change
 * the mask meanwhile (no system call is stepped, another stop ends it), so
 * it is put back as it was.  (A SIGKILL of gebpf and its worker between
 * the two leaves it blocked; from the first step on the trap flag would
 * kill the thread anyway, as after any step: ptrace/step.h.) */
static void step_out(struct patch_trap *pt, struct gb_engine *e, size_t i)
{
	struct patch_thread *th = pth(e, i);
	pid_t tid = eng_tid(e, i);
	struct step_ctx c = { e, i };
	struct user_regs_struct r;
	struct gb_stop st = { .kind = GB_STOP_STEP };
	uint64_t mask;
	bool held = false, out = false;
	for (int n = 0; st.kind == GB_STOP_STEP; n++) {
		if (gb_regs_get(tid, &r) || (out = out_of_patches(pt, r.rip)) || n == PATCH_STEP_MAX ||
		    at_syscall(pt, r.rip))
			break;
		if (!n)
			held = hold(tid, th->later_sig, &mask, true);
		int err = gb_step(tid, 0, NULL, step_event, &c, &st);
		if (err) {
			if (held)
				hold(tid, 0, &mask, false);
			if (err == -ESRCH)
				eng_set_state(e, i, T_DYING);
			return;
		}
		eng_th(e, i)->stepped = true; /* (the trap flag: eng_untrap) */
	}
	if (held && !hold(tid, 0, &mask, false))
		return; /* (gone) */
	if (st.kind != GB_STOP_STEP) {
		eng_dispatch(e, &st); /* any other stop is the engine's, as ever */
		if (eng_state(e, i) == T_STOPPED)
			eng_th(e, i)->stepped = true;
		return;
	}
	if (!out)
		return;
	int sig = th->later_sig;
	siginfo_t si = th->later_si;
	bool stepped = eng_th(e, i)->stepped;
	th->later_sig = 0;
	pt->later_out++;
	if (gb_jit__in_code(pt->j, r.rip)) {
		if (patch_take(pt, e, i, &r, sig, NULL) != GB_TRAP_PROGRAM)
			return;
	} else {
		patch_later_taken(e, i);
		if (th->sigret && patch_caught(pt->pid, sig))
			th->sigret++; /* (inside a handler being watched: its own return first) */
	}
	/* the stop is the last step's: the signal with its own siginfo */
	ptrace(PTRACE_SETSIGINFO, tid, 0, &si);
	eng_keep_signal(e, i, sig);
	eng_th(e, i)->stepped = stepped;
}

void patch_later_step(struct patch_trap *pt, struct gb_engine *e)
{
	for (size_t i = 0; pt->j && pt->written && i < e->t->nthreads; i++) {
		struct patch_thread *th = pth(e, i);
		if (!th->later_step)
			continue;
		th->later_step = false;
		if (th->later_sig && eng_state(e, i) == T_STOPPED)
			step_out(pt, e, i);
	}
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

void patch_later_taken(struct gb_engine *e, size_t i) { pth(e, i)->later_n = 0; }

void patch_later_end(struct gb_engine *e)
{
	for (size_t i = 0; i < e->t->nthreads; i++) {
		struct patch_thread *th = pth(e, i);
		if (th->later_sig && !th->later_sent && !e->t->threads[i].pending_sig)
			e->t->threads[i].pending_sig = th->later_sig; /* (delivered at the detach) */
		th->later_sig = 0;
		th->later_step = false;
	}
}
