#include "ptrace/wait.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>

#include "common/sigflag.h"
#include "ptrace/procfs.h"

#ifndef TRAP_TRACE
#define TRAP_TRACE 2
#endif
#ifndef TRAP_BRKPT
#define TRAP_BRKPT 1
#endif

const char *gb_stop_kind_name(enum gb_stop_kind k)
{
	static const char *const names[] = {
		[GB_STOP_EXITED] = "exited", [GB_STOP_KILLED] = "killed",
		[GB_STOP_STEP] = "step", [GB_STOP_SIGNAL] = "signal",
		[GB_STOP_GROUP] = "group-stop", [GB_STOP_SYSCALL] = "syscall",
		[GB_STOP_EVENT] = "event", [GB_STOP_INTERRUPT] = "interrupt",
	};
	return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

void gb_stop_classify(pid_t tid, int status, struct gb_stop *out)
{
	memset(out, 0, sizeof(*out));
	out->tid = tid;
	if (WIFEXITED(status)) {
		out->kind = GB_STOP_EXITED;
		out->code = WEXITSTATUS(status);
		return;
	}
	if (WIFSIGNALED(status)) {
		out->kind = GB_STOP_KILLED;
		out->sig = WTERMSIG(status);
		return;
	}
	/* WIFSTOPPED from here on. */
	int sig = WSTOPSIG(status);
	int event = (unsigned)status >> 16;
	out->sig = sig;
	if (sig == (SIGTRAP | 0x80)) {
		out->kind = GB_STOP_SYSCALL;
		out->sig = SIGTRAP;
		return;
	}
	if (event == PTRACE_EVENT_STOP) {
		/* Group-stop under PTRACE_SEIZE, or a PTRACE_INTERRUPT/LISTEN stop. */
		if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU)
			out->kind = GB_STOP_GROUP;
		else
			out->kind = GB_STOP_INTERRUPT;
		return;
	}
	if (event) {
		out->kind = GB_STOP_EVENT;
		out->event = event;
		ptrace(PTRACE_GETEVENTMSG, tid, 0, &out->msg);
		return;
	}
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	if (ptrace(PTRACE_GETSIGINFO, tid, 0, &si) == 0) {
		out->code = si.si_code;
		if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP)
			out->fault_addr = (uint64_t)(uintptr_t)si.si_addr;
	}
	/* A single-step trap: TRAP_TRACE; TRAP_BRKPT when the stepped
	 * instruction was a syscall (reported at syscall exit); si_code ==
	 * SIGTRAP (ptrace_notify) when a step delivered a signal and stopped
	 * after building its frame, before the handler's first instruction.
	 * Anything else (kill(SIGTRAP), int3 = SI_KERNEL) is a real signal for
	 * the program. */
	if (sig == SIGTRAP && (si.si_code == TRAP_TRACE || si.si_code == TRAP_BRKPT ||
			       si.si_code == SIGTRAP)) {
		out->kind = GB_STOP_STEP;
		return;
	}
	out->kind = GB_STOP_SIGNAL;
}

/* How long a wait sleeps between looks at the process and the stop flag. */
#define SLICE_MS 100
/* How long a wait the caller did not make interruptible still waits once a
 * SIGINT/SIGTERM arrived (it normally ends in microseconds: a step, an
 * interrupt). */
#define GRACE_MS 1000

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int gb_wait(pid_t tid, int flags, struct gb_stop *out, bool stop_on_signal)
{
	int status;
	if (flags & WNOHANG) {
		for (;;) {
			pid_t r = waitpid(tid, &status, flags | __WALL);
			if (r > 0) {
				gb_stop_classify(r, status, out);
				return 0;
			}
			if (r == 0)
				return -EAGAIN; /* nothing yet */
			if (errno != EINTR)
				return -errno;
			if (stop_on_signal && gb_sigflag_stop())
				return -EINTR;
		}
	}
	/* Blocking: in slices, woken by SIGCHLD (blocked meanwhile, so that
	 * sigtimedwait sees it), looking between slices at whether the thread
	 * can still report and whether Ctrl-C/SIGTERM arrived. */
	sigset_t chld, old;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old);
	int64_t flag_seen = -1;
	int ret;
	for (;;) {
		pid_t r = waitpid(tid, &status, flags | WNOHANG | __WALL);
		if (r > 0) {
			gb_stop_classify(r, status, out);
			ret = 0;
			break;
		}
		if (r < 0 && errno != EINTR) {
			ret = -errno;
			break;
		}
		if (r == 0 && tid > 0 && gb_proc_gone(tid)) {
			/* Exited: its report is either there now or never comes
			 * (an exited leader waits for its other threads). */
			r = waitpid(tid, &status, flags | WNOHANG | __WALL);
			if (r > 0) {
				gb_stop_classify(r, status, out);
				ret = 0;
			} else {
				ret = -ESRCH;
			}
			break;
		}
		if (gb_sigflag_stop()) {
			if (flag_seen < 0)
				flag_seen = now_ms();
			if (stop_on_signal || now_ms() - flag_seen >= GRACE_MS) {
				ret = -EINTR;
				break;
			}
		}
		if (r < 0)
			continue; /* EINTR: look again */
		struct timespec ts = { 0, SLICE_MS * 1000000L };
		sigtimedwait(&chld, NULL, &ts); /* a SIGCHLD, a slice, or EINTR */
	}
	if (!sigismember(&old, SIGCHLD))
		sigprocmask(SIG_SETMASK, &old, NULL);
	return ret;
}
