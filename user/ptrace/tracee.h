/* Tracee control: launch or seize a process and all of its threads.
 *
 * Launch: fork, ASLR off unless asked (personality), SIGSTOP self, seize with
 * TRACECLONE|TRACEFORK|TRACEVFORK|TRACEEXEC|EXITKILL, exec; the tracee is
 * returned stopped at the exec event (the new image's first instruction).
 * Attach: PTRACE_SEIZE every thread of /proc/PID/task (rescanned until two
 * passes find no new thread) and PTRACE_INTERRUPT them all; returned with
 * every thread stopped.  A process stopped by job control (SIGSTOP, Ctrl-Z)
 * is attached to as any other: its threads report group-stops
 * (gb_thread.group_stop, gb_tracee.stopped_by), and a detach leaves it
 * stopped (the kernel puts a thread let go back into its process's
 * group-stop).
 */
#ifndef GB_PTRACE_TRACEE_H
#define GB_PTRACE_TRACEE_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct gb_thread {
	pid_t tid;
	bool stopped;       /* in a ptrace-stop we can operate on */
	bool exited;
	int pending_sig;    /* signal to inject on the next resume (0 = none) */
	bool group_stop;    /* its last stop reported its process stopped by job
			     * control (a group-stop: SIGSTOP, SIGTSTP, SIGTTIN,
			     * SIGTTOU, until SIGCONT): a resume other than
			     * PTRACE_LISTEN would run it all the same */
	bool keep_gs;       /* the detach's zero_gs leaves its gs base (a thread
			     * the patch trap's end left with its cache) */
	void *eng;          /* the state of whoever runs the thread (the trace
			     * engine's, trace/engine_int.h), or NULL: theirs to
			     * make and free */
};

struct gb_tracee {
	pid_t pid;
	bool launched;            /* we started it (EXITKILL, we reap it) */
	struct gb_thread *threads;
	size_t nthreads, cap;
	cpu_set_t saved_affinity; /* the target's affinity before we pinned it */
	bool affinity_saved;
	int pin_cpu;              /* the CPU tracer and tracee share while pinned */
	int exit_status;          /* valid once the leader exited (wait status) */
	int stopped_by;           /* attached: the signal that had stopped the process
				   * (job control, state T), or 0: it was running */
	bool exited;
	double stopped_at;        /* attached: when gebpf began stopping it (monotonic s) for
				   * the set-up (until its first resume) or the end (until
				   * the detach); 0 while it runs */
	bool say_windows;         /* the detach says (-v) how long the end kept it stopped
				   * (trace's; snap has its own freeze line) */
	bool zero_gs;             /* the detach sets every thread's gs base 0 first (the
				   * patch trap's end: a thread made while it ended copied
				   * its creator's, which gebpf had set) */
	pid_t keeper;             /* launched with ns_pid: gebpf's child that ends as the
				   * process ends (pidns.h; the process is not gebpf's
				   * child), else 0 */
};

struct gb_launch_opts {
	char *const *argv;
	bool aslr;                /* keep ASLR on (default: off) */
	pid_t ns_pid;             /* > 0: in a new pid namespace, with this pid there
				   * (ptrace/pidns.h) */
};

/* 0, or -errno with a "gebpf: ..." line already printed. */
int gb_tracee_launch(const struct gb_launch_opts *o, struct gb_tracee *t);
int gb_tracee_attach(pid_t pid, struct gb_tracee *t);
/* Detach every thread that is still alive, resuming it with its pending
 * signal (nothing lost); restores the saved affinity.  Frees the struct's
 * storage.  Safe to call twice. */
void gb_tracee_detach(struct gb_tracee *t);
/* Kill a launched tracee and reap it. */
void gb_tracee_kill(struct gb_tracee *t);

struct gb_thread *gb_tracee_thread(struct gb_tracee *t, pid_t tid);
struct gb_thread *gb_tracee_add_thread(struct gb_tracee *t, pid_t tid);
/* A thread created by a traced one (auto-attached, it starts in a
 * ptrace-stop of its own): add it and wait for that stop. */
void gb_tracee_adopt(struct gb_tracee *t, pid_t tid);
void gb_tracee_free(struct gb_tracee *t);

/* Pin the tracer to one CPU (its current one, if the target may run there)
 * and, with all_threads, every thread of the target too.  The target's own
 * affinity is saved: gb_tracee_detach restores it. */
void gb_tracee_pin(struct gb_tracee *t, bool all_threads);
/* Pin one thread to the tracer's CPU, or give it back the target's own
 * affinity (on = false).  Nothing when pinning is off. */
void gb_tracee_pin_thread(struct gb_tracee *t, pid_t tid, bool on);

/* Why a pid cannot be traced, as text for "gebpf: pid N: <why>": checks
 * gebpf itself (common/guard.h), existence, zombie, kernel thread,
 * permission, existing tracer.  NULL when nothing obvious is wrong. */
const char *gb_pid_problem(pid_t pid, char *buf, size_t len);

#endif
