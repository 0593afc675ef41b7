/* The owner's signal handler, run natively (docs/trace.md "Signals").
 *
 * A signal given to the owner of the range while it is on its ground is
 * delivered by a step (estep.c), which stops at the handler's first
 * instruction.  A handler off the ground has no lines of its own, and
 * stepping it costs a ptrace stop per instruction: a timer faster than the
 * stepped handler (a profiler's 1 ms tick) would run it back to back and
 * the range would never advance.  So the handler runs natively, with
 * PTRACE_SYSCALL, its thread still the owner (no other thread's in-range
 * stretch can come between), until the rt_sigreturn of its own frame (the
 * one whose rsp is the frame's; a nested handler's frame is below it): at
 * that syscall's exit stop the registers are the restored ones.  Back on
 * the ground (where it was interrupted, or wherever a SA_SIGINFO handler
 * moved it), it goes on being traced from there.  Meanwhile the trap's
 * entries are armed for it (trap.h "handler"): a handler that calls into
 * the range, or longjmps into it, stops at an entry; then, or when the
 * handler leaves some other way, runs longer than GB_HANDLER_NATIVE_S or
 * the trace ends, the thread is the owner no more and the trap makes its
 * later return to the interrupted instruction an entry.  Program signals
 * meanwhile are delivered as they come (natively, as without gebpf). */
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <sys/user.h>

#include "common/clock.h"
#include "common/log.h"
#include "ptrace/mem.h"
#include "ptrace/regs.h"
#include "trace/engine_int.h"

/* A handler run natively for this long without coming back leaves the
 * range (the others may be waiting at its entries). */
#define GB_HANDLER_NATIVE_S 0.1
#define TF 0x100ull

/* The frame's saved rflags (its ucontext, after the restorer's address)
 * hold the trap flag of the step that delivered the signal: the program's
 * had none, and the handler's sigreturn, run natively, must not restore
 * it (the handler sees the flags it would see without gebpf). */
static void hide_tf(pid_t tid, uint64_t sp)
{
	uint64_t at = sp + 8 + offsetof(ucontext_t, uc_mcontext.gregs[REG_EFL]), fl;
	if (gb_mem_read(tid, at, &fl, 8) == 8 && (fl & TF)) {
		fl &= ~TF;
		gb_mem_write(tid, at, &fl, 8);
	}
}

/* Run thread i natively, with PTRACE_SYSCALL, to the rt_sigreturn of the
 * frame whose rsp there is sp (ret: the pc it interrupted on the ground). */
static void run_to_sigreturn(struct gb_engine *e, size_t i, uint64_t sp, uint64_t ret, bool tf)
{
	struct ethread *t = eng_th(e, i);
	if (!tf)
		hide_tf(eng_tid(e, i), sp - 8);
	t->h.sp = sp;
	t->h.ret = ret;
	t->h.t0 = gb_mono_s();
	t->h.sigret = t->h.interrupted = false;
	e->st.native_handlers++;
	eng_resume(e, i, PTRACE_SYSCALL, 0, T_HANDLER);
}

/* A handler on the ground is stepped as the range is; its frame is kept,
 * so that its return, through the restorer (off the ground), is followed
 * to where its rt_sigreturn lands (eng_handler_frame_left).  Frames at or
 * below its rsp are gone (returned, or left by a longjmp). */
static void keep_frame(struct ethread *t, uint64_t sp, uint64_t restorer, uint64_t ret, bool tf)
{
	while (t->nfr && t->fr[t->nfr - 1].sp <= sp)
		t->nfr--;
	if (t->nfr == sizeof(t->fr) / sizeof(t->fr[0])) {
		memmove(t->fr, t->fr + 1, sizeof(t->fr) - sizeof(t->fr[0]));
		t->nfr--;
	}
	t->fr[t->nfr].sp = sp;
	t->fr[t->nfr].restorer = restorer;
	t->fr[t->nfr].ret = ret;
	t->fr[t->nfr].tf = tf;
	t->nfr++;
}

bool eng_handler_run(struct gb_engine *e, size_t i, uint64_t ret, uint64_t rflags)
{
	struct user_regs_struct r;
	uint64_t restorer;
	if (e->ended || e->owner != (ssize_t)i || !trap_native(e) || !TRAP_OPS(e)->handler ||
	    !eng_inside(e, ret) || gb_regs_get(eng_tid(e, i), &r))
		return false;
	if (eng_inside(e, r.rip)) {
		if (gb_mem_read(eng_tid(e, i), r.rsp, &restorer, 8) == 8)
			keep_frame(eng_th(e, i), r.rsp + 8, restorer, ret, rflags & TF);
		return false;
	}
	if (!TRAP_OPS(e)->handler(e->trap, e, i, ret))
		return false;
	run_to_sigreturn(e, i, r.rsp + 8, ret, rflags & TF);
	return true;
}

bool eng_handler_frame_left(struct gb_engine *e, size_t i, const struct user_regs_struct *r)
{
	struct ethread *t = eng_th(e, i);
	if (!t->nfr || e->ended || e->owner != (ssize_t)i)
		return false;
	typeof(t->fr[0]) f = t->fr[t->nfr - 1];
	if (r->rip != f.restorer || r->rsp != f.sp)
		return false;
	t->nfr--;
	if (!TRAP_OPS(e)->handler || !TRAP_OPS(e)->handler(e->trap, e, i, f.ret))
		return false;
	gb_info("trace: thread %d: a handler on the range returns through its restorer at 0x%llx: "
		"followed to its rt_sigreturn", eng_tid(e, i), (unsigned long long)f.restorer);
	run_to_sigreturn(e, i, f.sp, f.ret, f.tf);
	return true;
}

/* The native run is over, thread i stopped at an instruction boundary (or
 * at an entry, waiting for the range: want_entry). */
static void over(struct gb_engine *e, size_t i, bool back)
{
	bool entry = eng_th(e, i)->want_entry;
	eng_set_state(e, i, T_STOPPED);
	eng_th(e, i)->want_entry = entry;
	TRAP_CALL(e, handler_end, i, back, eng_th(e, i)->h.ret);
	if (!back) {
		gb_info("trace: thread %d leaves the range in a signal handler", eng_tid(e, i));
		eng_set_owner(e, -1);
	}
}

static void go_on(struct gb_engine *e, size_t i, int sig)
{
	eng_resume(e, i, PTRACE_SYSCALL, sig, T_HANDLER);
}

static void on_syscall(struct gb_engine *e, size_t i, const struct gb_stop *st)
{
	struct ethread *t = eng_th(e, i);
	struct user_regs_struct r;
	if (gb_regs_get(eng_tid(e, i), &r)) {
		eng_set_state(e, i, T_DYING);
		return;
	}
	if (!st->sys_exit) {
		t->h.sigret = r.orig_rax == SYS_rt_sigreturn && r.rsp == t->h.sp;
	} else if (t->h.sigret) {
		/* Its frame is restored: rip is where it goes on. */
		gb_icache__bump(e->ic); /* the handler may have written code */
		over(e, i, eng_inside(e, r.rip));
		return;
	}
	go_on(e, i, 0);
}

void eng_handler_stop(struct gb_engine *e, size_t i, const struct gb_stop *st)
{
	switch (st->kind) {
	case GB_STOP_EXITED:
	case GB_STOP_KILLED:
		eng_on_exit(e, i, st);
		return;
	case GB_STOP_SYSCALL:
		on_syscall(e, i, st);
		return;
	case GB_STOP_SIGNAL:
		switch (trap_classify(e, i, st, GB_AT_NATIVE, 0)) {
		case GB_TRAP_WATCH:
			gb_icache__bump(e->ic);
			go_on(e, i, 0);
			return;
		case GB_TRAP_SWALLOW:
		case GB_TRAP_STEP:
			go_on(e, i, 0);
			return;
		case GB_TRAP_ENTRY:
			/* The handler enters the range: it waits there for it,
			 * as any thread at an entry. */
			eng_th(e, i)->want_entry = true;
			eng_range_follow(e);
			over(e, i, false);
			return;
		case GB_TRAP_PROGRAM:
			break;
		}
		eng_range_follow(e);
		gb_info("trace: thread %d: signal %d in a signal handler", st->tid, st->sig);
		if (eng_th(e, i)->want_entry) {
			/* An entry's hit taken with it (the signal came first):
			 * the thread waits for the range, the signal kept for
			 * after the entry's instruction, as any thread's. */
			eng_keep_signal(e, i, st->sig);
			over(e, i, false);
			return;
		}
		go_on(e, i, st->sig);
		return;
	case GB_STOP_GROUP:
		over(e, i, false);
		eng_listen(e, i);
		return;
	case GB_STOP_EVENT:
		eng_event(e, i, st);
		if (st->event == PTRACE_EVENT_EXEC) {
			/* A new image (the owner no more): on to the exec's exit. */
			eng_resume(e, i, PTRACE_SYSCALL, 0, T_SYSCALL);
			return;
		}
		if (eng_state(e, i) == T_HANDLER)
			go_on(e, i, 0);
		return;
	default:
		/* Interrupted (the end, or it ran too long). */
		over(e, i, false);
		return;
	}
}

void eng_handler_tick(struct gb_engine *e, size_t i)
{
	struct ethread *t = eng_th(e, i);
	if (t->h.interrupted || (!e->ended && gb_mono_s() - t->h.t0 < GB_HANDLER_NATIVE_S))
		return;
	ptrace(PTRACE_INTERRUPT, eng_tid(e, i), 0, 0);
	t->h.interrupted = true;
}
