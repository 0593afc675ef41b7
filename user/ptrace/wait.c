#include "ptrace/wait.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include "common/sigflag.h"

#ifndef TRAP_TRACE
#define TRAP_TRACE 2
#endif
#define GB_PTRACE_GET_SYSCALL_INFO 0x420e
#define GB_SYSCALL_INFO_EXIT 2

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
		/* Entry or exit: PTRACE_GET_SYSCALL_INFO (Linux 5.3) says which. */
		struct { uint8_t op; uint8_t pad[7]; uint64_t rest[10]; } info;
		out->kind = GB_STOP_SYSCALL;
		out->sig = SIGTRAP;
		if (ptrace(GB_PTRACE_GET_SYSCALL_INFO, tid, sizeof(info), &info) > 0)
			out->sys_exit = info.op == GB_SYSCALL_INFO_EXIT;
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
		out->sender = si.si_pid;
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

int gb_wait(pid_t tid, int flags, struct gb_stop *out, bool stop_on_signal)
{
	int status;
	for (;;) {
		pid_t r = waitpid(tid, &status, flags | __WALL);
		if (r > 0) {
			gb_stop_classify(r, status, out);
			return 0;
		}
		if (r == 0)
			return -EAGAIN; /* WNOHANG, nothing yet */
		if (errno == EINTR) {
			if (stop_on_signal && gb_sigflag_stop())
				return -EINTR;
			continue;
		}
		return -errno;
	}
}
