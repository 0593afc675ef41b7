/* ptrace stops get a type (rr's WaitStatus): every waitpid() status is
 * classified once, here, and callers switch on the class. */
#ifndef GB_PTRACE_WAIT_H
#define GB_PTRACE_WAIT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum gb_stop_kind {
	GB_STOP_EXITED,      /* thread/process exited: code = exit status */
	GB_STOP_KILLED,      /* killed by a signal: sig */
	GB_STOP_STEP,        /* single-step trap completed (SIGTRAP TRAP_TRACE, or TRAP_BRKPT at syscall exit) */
	GB_STOP_SIGNAL,      /* signal-delivery-stop for sig (to be injected on resume) */
	GB_STOP_GROUP,       /* group-stop (SIGSTOP/SIGTSTP/...): sig; also the stop of a
			      * PTRACE_INTERRUPT while the process is stopped */
	GB_STOP_SYSCALL,     /* syscall-enter/exit stop (PTRACE_O_TRACESYSGOOD) */
	GB_STOP_EVENT,       /* PTRACE_EVENT_*: event */
	GB_STOP_INTERRUPT,   /* PTRACE_INTERRUPT / PTRACE_LISTEN stop (EVENT_STOP, the
			      * process not stopped by job control: SIGTRAP) */
};

struct gb_stop {
	pid_t tid;
	enum gb_stop_kind kind;
	int sig;            /* signal number where relevant */
	int event;          /* PTRACE_EVENT_* for GB_STOP_EVENT */
	int code;           /* exit status, or si_code of the signal */
	uint64_t fault_addr; /* siginfo si_addr for fault signals */
	unsigned long msg;  /* PTRACE_GETEVENTMSG for events (new tid, exit status) */
	int status;         /* the raw waitpid status */
	bool sys_exit;      /* GB_STOP_SYSCALL: a syscall-exit stop (else entry) */
	pid_t sender;       /* GB_STOP_SIGNAL: siginfo si_pid (the sender, for SI_USER) */
};

/* Is st the stop a PTRACE_INTERRUPT ends in?  GB_STOP_INTERRUPT, or
 * GB_STOP_GROUP: while its process is stopped by job control (SIGSTOP,
 * SIGTSTP, SIGTTIN, SIGTTOU, until SIGCONT) the kernel reports an interrupt
 * with the stop signal, as a group-stop (kernel/signal.c do_jobctl_trap).
 * Either way the thread is stopped before it returns to user mode, its
 * registers its own, and runs nothing until resumed. */
static inline bool gb_stop_is_interrupt(const struct gb_stop *st)
{
	return st->kind == GB_STOP_INTERRUPT || st->kind == GB_STOP_GROUP;
}

/* Is sig a job-control stop signal (SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU)? */
static inline bool gb_sig_is_stop(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}
/* Thread tid, in a ptrace-stop: when it is the stop a PTRACE_INTERRUPT ends
 * in (or a group-stop), the signal it was reported with: a stop signal while
 * its process is stopped by job control, SIGTRAP otherwise (a SIGCONT came
 * before it stopped); 0 at any other stop (a step, a syscall or signal
 * stop, an event), -errno.  From the stop's siginfo, so it tells the
 * state of the process at that stop, however long ago it was reported. */
int gb_stop_event_sig(pid_t tid);

/* Classify a waitpid status of tid (reads siginfo / event message as needed). */
void gb_stop_classify(pid_t tid, int status, struct gb_stop *out);
/* waitpid(tid, flags | __WALL): 0 with the stop classified, or -errno:
 * -EAGAIN with WNOHANG and nothing ready; -ESRCH when tid exited and cannot
 * report (the whole process is gone: an exited group leader reports only
 * after its other threads are reaped); -EINTR when a SIGINT/SIGTERM arrived
 * (gb_sigflag): at once with stop_on_signal, else after a grace of one
 * second.  So no wait outlives the process or ignores Ctrl-C. */
int gb_wait(pid_t tid, int flags, struct gb_stop *out, bool stop_on_signal);
/* Wait for the stop that ends a resume of tid (a step, PTRACE_SYSCALL,
 * PTRACE_CONT to a breakpoint), never leaving it running that resume: when
 * a SIGINT/SIGTERM arrived and the grace passed, tid is interrupted
 * (PTRACE_INTERRUPT, *interrupted set) and waited for however long its
 * stop takes (a thread of a frozen cgroup stops when it can).  A thread
 * left running a single step by a tracer that exits keeps the trap flag
 * and dies of SIGTRAP at its next instruction; stopped, a detach clears
 * it.  0 with the stop (an interrupt stop when the resume did not get
 * where it was going), or -errno (-ESRCH: the thread is gone); never
 * -EINTR. */
int gb_wait_resumed(pid_t tid, struct gb_stop *out, bool *interrupted);
/* Give back an exit (GB_STOP_EXITED/KILLED) a caller took but does not
 * own: the next gb_wait for its tid or for any (-1) returns it, so that the
 * owner of the thread's state (the trace engine) learns of it. */
void gb_wait_putback(const struct gb_stop *st);
const char *gb_stop_kind_name(enum gb_stop_kind k);

#endif
