/* The engine's thread and process events (clone, fork, vfork, vfork-done,
 * exec), whichever runner or dispatcher met them: threads appearing, fork
 * children let go untraced, the exec (the range followed into the new
 * image, the kernel's uprobe page placed at the exec's exit). */
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/user.h>

#include "common/grow.h"
#include "common/log.h"
#include "ptrace/procfs.h"
#include "ptrace/tracee.h"
#include "trace/engine_int.h"
#include "trace/xol.h"

/* A new task is a thread of ours when its thread group is our process
 * (/proc/TID/status Tgid; /proc/PID/task/TID may not list it yet). */
static bool is_thread_of(pid_t pid, pid_t tid)
{
	uint64_t tgid;
	return gb_proc_status_num(tid, "Tgid", 10, &tgid) == 0 && tgid == (uint64_t)pid;
}

bool eng_was_detached(struct gb_engine *e, pid_t pid)
{
	for (size_t i = 0; i < e->ndetached; i++)
		if (e->detached[i] == pid)
			return true;
	return false;
}

static void remember_detached(struct gb_engine *e, pid_t pid)
{
	if (GB_GROW(&e->detached, &e->detached_cap, e->ndetached + 1)) {
		eng_finish(e, GB_END_ERROR);
		return;
	}
	e->detached[e->ndetached++] = pid;
}

static bool is_pending_kid(struct gb_engine *e, pid_t pid, bool take)
{
	for (size_t i = 0; i < e->npending_kids; i++)
		if (e->pending_kids[i] == pid) {
			if (take)
				e->pending_kids[i] = e->pending_kids[--e->npending_kids];
			return true;
		}
	return false;
}

static void add_thread(struct gb_engine *e, pid_t tid)
{
	struct gb_thread *th = gb_tracee_add_thread(e->t, tid);
	if (!th)
		return;
	size_t i = (size_t)(th - e->t->threads);
	gb_info("trace: new thread %d", tid);
	eng_thread_reset(e, i); /* (a tid reused: a new thread all the same) */
	eng_set_state(e, i, T_STOPPED);
	if (!trap_native(e))
		gb_tracee_pin_thread(e->t, tid, true); /* every thread is stepped */
}

/* A child process, stopped at its first stop: let it go untraced (with
 * nothing of the trap left in it: the trap's child hook). */
static void let_go_child(struct gb_engine *e, pid_t child, bool vfork)
{
	gb_info("trace: %s child %d let go", vfork ? "vfork" : "forked", child);
	TRAP_CALL(e, child, child, vfork ? GB_CHILD_VFORK : GB_CHILD_FORK);
	ptrace(PTRACE_DETACH, child, 0, 0);
	remember_detached(e, child);
}

void eng_adopt(struct gb_engine *e, pid_t tid)
{
	if (is_thread_of(e->t->pid, tid))
		add_thread(e, tid);
	else if (!is_pending_kid(e, tid, false)) {
		/* A child whose first stop came before its parent's event: the
		 * event says fork or vfork; wait for it. */
		if (GB_GROW(&e->pending_kids, &e->pending_kids_cap, e->npending_kids + 1)) {
			eng_finish(e, GB_END_ERROR);
			return;
		}
		e->pending_kids[e->npending_kids++] = tid;
	}
}

static void new_task(struct gb_engine *e, pid_t nt, int event)
{
	if (eng_index(e, nt) >= 0 || eng_was_detached(e, nt))
		return; /* a thread whose first stop was seen already */
	if (!is_pending_kid(e, nt, true)) {
		/* Its first stop (it starts in one of its own). */
		struct gb_stop st;
		if (gb_wait(nt, 0, &st, false) || st.kind == GB_STOP_EXITED || st.kind == GB_STOP_KILLED)
			return;
		if (is_thread_of(e->t->pid, nt)) {
			add_thread(e, nt);
			return;
		}
	}
	let_go_child(e, nt, event == PTRACE_EVENT_VFORK);
}

static void on_exec(struct gb_engine *e, size_t i)
{
	/* Every other thread is gone; the exec'ing thread now has tid == pid. */
	for (size_t k = 0; k < e->t->nthreads; k++)
		if (k != i)
			eng_set_state(e, k, T_GONE);
	e->exec_from = e->t->threads[i].tid;
	e->xol_due = true;
	e->t->threads[i].tid = e->t->pid;
	eng_set_owner(e, -1);
	gb_icache__clear(e->ic);
	e->image_gen++; /* the code cache went with the old image */
	TRAP_CALL0(e, exec); /* the range in the new image */
	eng_range_follow(e);
}

/* Thread i at a syscall's exit, before its next instruction: after an exec,
 * the new image gets the kernel's uprobe page now, as at launch
 * (session.c), so that its later mappings are placed the same under every
 * trap, whichever engine ran the exec. */
void eng_exec_exit(struct gb_engine *e, size_t i)
{
	if (!e->xol_due)
		return;
	e->xol_due = false;
	gb_xol_reserve(e->t->pid, eng_tid(e, i));
}

void eng_event(struct gb_engine *e, size_t i, const struct gb_stop *st)
{
	switch (st->event) {
	case PTRACE_EVENT_CLONE:
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK:
		new_task(e, (pid_t)st->msg, st->event);
		break;
	case PTRACE_EVENT_VFORK_DONE:
		TRAP_CALL(e, child, (pid_t)st->msg, GB_CHILD_VFORK_DONE);
		break;
	case PTRACE_EVENT_EXEC:
		on_exec(e, i);
		break;
	}
}
