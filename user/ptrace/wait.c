#include "ptrace/wait.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/sigflag.h"
#include "ptrace/procfs.h"

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
	out->status = status;
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
		if (gb_sig_is_stop(sig))
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

int gb_stop_event_sig(pid_t tid)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	if (ptrace(PTRACE_GETSIGINFO, tid, 0, &si))
		return -errno;
	/* An event stop's si_code is its exit code: the signal | the event << 8
	 * (kernel/signal.c ptrace_do_notify). */
	return si.si_code >> 8 == PTRACE_EVENT_STOP ? si.si_signo : 0;
}

/* How long a wait sleeps between looks at the process and the stop flag,
 * and how long a blocked wait lasts before the watchdog looks at it. */
#define SLICE_MS 100
/* How long a wait the caller did not make interruptible still waits once a
 * SIGINT/SIGTERM arrived (it normally ends in microseconds: a step, an
 * interrupt). */
#define GRACE_MS 1000
#define STASH_MAX 256

/* The watchdog.  A blocking waitpid(tid) is the fast path (one syscall per
 * step), but it never returns for an exited group leader whose other
 * threads are zombies nobody reaps (a SIGKILLed process: the kernel reports
 * the leader only once its thread group is empty).  A thread of gebpf looks
 * every SLICE_MS at the wait in progress: one that has not moved for a
 * whole slice, for a leader that is gone, gets the leader's other threads
 * reaped (ptrace children of any thread of ours can be waited for from any
 * other), so that the leader's own exit reaches the waiter.  Their reports
 * are kept here and handed out first by the next gb_wait calls: nothing is
 * lost (gb_wait_putback keeps reports the same way).  A wait that blocked
 * just after a SIGINT/SIGTERM (which then did not interrupt it) gets the
 * signal once more.  Process-wide by nature (like common/sigflag), hence
 * static. */
static struct {
	pthread_once_t once;
	pthread_mutex_t mu;
	atomic_ulong seq;       /* bumped when a blocking wait starts and ends */
	atomic_int tid;         /* the tid a blocking wait is for (0: none) */
	pid_t waiter;           /* the thread of ours that waits (the tracer) */
	atomic_int nstash;
	struct { pid_t pid; int status; } stash[STASH_MAX];
} wd = { .once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER };

static void stash_push(pid_t pid, int status)
{
	pthread_mutex_lock(&wd.mu);
	int n = atomic_load(&wd.nstash);
	if (n < STASH_MAX) {
		wd.stash[n].pid = pid;
		wd.stash[n].status = status;
		atomic_store(&wd.nstash, n + 1);
	}
	pthread_mutex_unlock(&wd.mu);
}

/* A kept report for tid (-1: any). */
static bool stash_pop(pid_t tid, int *pid, int *status)
{
	if (!atomic_load(&wd.nstash))
		return false;
	bool found = false;
	pthread_mutex_lock(&wd.mu);
	int n = atomic_load(&wd.nstash);
	for (int i = 0; i < n && !found; i++) {
		if (tid != -1 && wd.stash[i].pid != tid)
			continue;
		*pid = wd.stash[i].pid;
		*status = wd.stash[i].status;
		memmove(&wd.stash[i], &wd.stash[i + 1], (size_t)(n - i - 1) * sizeof(wd.stash[0]));
		atomic_store(&wd.nstash, n - 1);
		found = true;
	}
	pthread_mutex_unlock(&wd.mu);
	return found;
}

/* Reap the exited threads of leader's process other than leader. */
static void reap_others(pid_t leader)
{
	pid_t *tids;
	size_t n;
	if (gb_proc_tasks(leader, &tids, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		pid_t t = tids[i];
		int status;
		if (t != leader && gb_proc_gone(t) && waitpid(t, &status, WNOHANG | __WALL) == t)
			stash_push(t, status);
	}
	free(tids);
}

static void *watchdog(void *arg)
{
	unsigned long last = 0;
	for (;;) {
		struct timespec ts = { 0, SLICE_MS * 1000000L };
		nanosleep(&ts, NULL);
		unsigned long seq = atomic_load(&wd.seq);
		pid_t tid = atomic_load(&wd.tid);
		if (seq == last && (seq & 1) && gb_sigflag_stop()) {
			/* The stop signal came just before the wait blocked
			 * (it did not interrupt it): once more, to the waiter. */
			syscall(SYS_tgkill, getpid(), wd.waiter, gb_sigflag_signo());
		} else if (tid > 0 && seq == last && (seq & 1) && gb_proc_gone(tid)) {
			reap_others(tid);
		}
		last = seq;
	}
	return arg;
}

static void start_watchdog(void)
{
	sigset_t all, old;
	pthread_t th;
	wd.waiter = (pid_t)syscall(SYS_gettid);
	sigfillset(&all);
	/* Created with every signal blocked: SIGINT/SIGTERM go to the tracer
	 * thread and interrupt its waits. */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&th, NULL, watchdog, NULL) == 0)
		pthread_detach(th);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void gb_wait_putback(const struct gb_stop *st)
{
	stash_push(st->tid, st->status);
}

/* grace_ms: how long a wait goes on once a SIGINT/SIGTERM arrived (0: it
 * ends at once; -1: it never ends for it). */
static int wait_for(pid_t tid, int flags, struct gb_stop *out, int grace_ms)
{
	bool stop_on_signal = grace_ms == 0;
	int status;
	pid_t got;
	if (stash_pop(tid, &got, &status)) {
		gb_stop_classify(got, status, out);
		return 0;
	}
	if (!(flags & WNOHANG) && !gb_sigflag_stop()) {
		/* The fast path: block (the watchdog above unblocks a wait for a
		 * dead leader; SIGINT/SIGTERM interrupt it: no SA_RESTART). */
		pthread_once(&wd.once, start_watchdog);
		atomic_store(&wd.tid, tid);
		atomic_fetch_add(&wd.seq, 1);
		got = waitpid(tid, &status, flags | __WALL);
		int e = errno;
		atomic_fetch_add(&wd.seq, 1);
		atomic_store(&wd.tid, 0);
		if (got > 0) {
			gb_stop_classify(got, status, out);
			return 0;
		}
		if (stash_pop(tid, &got, &status)) {
			gb_stop_classify(got, status, out);
			return 0;
		}
		if (e != EINTR)
			return e == ECHILD && tid > 0 && gb_proc_gone(tid) ? -ESRCH : -e;
		/* Interrupted: the slow path below decides. */
	}
	if (flags & WNOHANG) {
		for (;;) {
			got = waitpid(tid, &status, flags | __WALL);
			if (got > 0) {
				gb_stop_classify(got, status, out);
				return 0;
			}
			if (got == 0)
				return -EAGAIN; /* nothing yet */
			if (errno != EINTR)
				return -errno;
			if (stop_on_signal && gb_sigflag_stop())
				return -EINTR;
		}
	}
	/* The slow path, once a signal arrived: in slices, woken by SIGCHLD
	 * (blocked meanwhile, so that sigtimedwait sees it), looking between
	 * slices at whether the thread can still report and at the stop flag. */
	sigset_t chld, old;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old);
	int64_t flag_seen = -1;
	int ret;
	for (;;) {
		got = waitpid(tid, &status, flags | WNOHANG | __WALL);
		if (got > 0) {
			gb_stop_classify(got, status, out);
			ret = 0;
			break;
		}
		if (got < 0 && errno != EINTR) {
			ret = -errno;
			break;
		}
		if (got == 0 && tid > 0 && gb_proc_gone(tid)) {
			/* Exited: its report is either there now or never comes
			 * (an exited leader waits for its other threads). */
			got = waitpid(tid, &status, flags | WNOHANG | __WALL);
			if (got > 0) {
				gb_stop_classify(got, status, out);
				ret = 0;
			} else {
				ret = -ESRCH;
			}
			break;
		}
		if (gb_sigflag_stop() && grace_ms >= 0) {
			if (flag_seen < 0)
				flag_seen = (int64_t)(gb_mono_ns() / 1000000);
			if (grace_ms >= 0 &&
			    (int64_t)(gb_mono_ns() / 1000000) - flag_seen >= grace_ms) {
				ret = -EINTR;
				break;
			}
		}
		if (got < 0)
			continue; /* EINTR: look again */
		struct timespec ts = { 0, SLICE_MS * 1000000L };
		sigtimedwait(&chld, NULL, &ts); /* a SIGCHLD, a slice, or EINTR */
	}
	if (!sigismember(&old, SIGCHLD))
		sigprocmask(SIG_SETMASK, &old, NULL);
	return ret;
}

int gb_wait(pid_t tid, int flags, struct gb_stop *out, bool stop_on_signal)
{
	return wait_for(tid, flags, out, stop_on_signal ? 0 : GRACE_MS);
}

int gb_wait_resumed(pid_t tid, struct gb_stop *out, bool *interrupted)
{
	*interrupted = false;
	int r = wait_for(tid, 0, out, GRACE_MS);
	if (r != -EINTR)
		return r;
	/* Still running what it was resumed for (a step the scheduler has not
	 * run yet, a thread in a frozen cgroup...): stopped where it is.  An
	 * interrupt is reported before the thread returns to user mode, so a
	 * step not begun never runs.  A v2 frozen cgroup reports it at
	 * once (a ptrace stop counts as frozen); a v1 freezer only on thaw.
	 * (A step that ran just before may have its trap queued behind the
	 * interrupt stop: a detach drops it, tracee.c.) */
	*interrupted = true;
	ptrace(PTRACE_INTERRUPT, tid, 0, 0);
	r = wait_for(tid, 0, out, 1000);
	if (r == -EINTR) {
		gb_warn("thread %d: still running what it was resumed for; waiting for it to "
			"stop before letting it go (is its cgroup frozen?)", tid);
		r = wait_for(tid, 0, out, -1);
	}
	return r;
}
