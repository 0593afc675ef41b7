#include "ptrace/tracee.h"

#include <errno.h>
#include <linux/capability.h>
#include <inttypes.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/mman.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cpuset.h"
#include "common/grow.h"
#include "common/guard.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/page.h"
#include "ptrace/regs.h"
#include "ptrace/maps.h"
#include "ptrace/pidns.h"
#include "ptrace/procfs.h"
#include "ptrace/wait.h"

#ifndef TRAP_BRKPT
#define TRAP_BRKPT 1
#endif
#ifndef TRAP_TRACE
#define TRAP_TRACE 2
#endif
#ifndef SEGV_ACCERR
#define SEGV_ACCERR 2
#endif

#define SEIZE_OPTS (PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACEVFORKDONE | \
		    PTRACE_O_TRACEEXEC | PTRACE_O_TRACESYSGOOD)
#define PF_KTHREAD 0x00200000

struct gb_thread *gb_tracee_thread(struct gb_tracee *t, pid_t tid)
{
	for (size_t i = 0; i < t->nthreads; i++)
		if (t->threads[i].tid == tid)
			return &t->threads[i];
	return NULL;
}

struct gb_thread *gb_tracee_add_thread(struct gb_tracee *t, pid_t tid)
{
	struct gb_thread *th = gb_tracee_thread(t, tid);
	if (th)
		return th;
	if (GB_GROW(&t->threads, &t->cap, t->nthreads + 1))
		return NULL;
	th = &t->threads[t->nthreads++];
	memset(th, 0, sizeof(*th));
	th->tid = tid;
	return th;
}

void gb_tracee_adopt(struct gb_tracee *t, pid_t tid)
{
	if (gb_tracee_thread(t, tid))
		return;
	struct gb_thread *th = gb_tracee_add_thread(t, tid);
	struct gb_stop st;
	if (!th || gb_wait(tid, 0, &st, false))
		return;
	th->exited = st.kind == GB_STOP_EXITED || st.kind == GB_STOP_KILLED;
	th->stopped = !th->exited;
	if (st.kind == GB_STOP_SIGNAL)
		th->pending_sig = st.sig;
}

void gb_tracee_free(struct gb_tracee *t)
{
	free(t->threads);
	t->threads = NULL;
	t->nthreads = t->cap = 0;
}

static pid_t tracer_of(pid_t pid, char *name, size_t len)
{
	char path[64];
	uint64_t tracer = 0;
	name[0] = 0;
	if (gb_proc_status_num(pid, "TracerPid", 10, &tracer) || !tracer)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)tracer);
	FILE *f = fopen(path, "re");
	if (f) {
		if (fgets(name, (int)len, f))
			name[strcspn(name, "\n")] = 0;
		fclose(f);
	}
	return (pid_t)tracer;
}

const char *gb_pid_problem(pid_t pid, char *buf, size_t len)
{
	char state;
	unsigned long flags;
	char name[64];
	if (pid <= 0) {
		snprintf(buf, len, "not a valid process id");
		return buf;
	}
	const char *self = gb_guard_self(pid);
	if (self) {
		snprintf(buf, len, "%s", self);
		return buf;
	}
	int r = gb_proc_stat(pid, &state, &flags);
	if (r == -ESRCH) {
		snprintf(buf, len, "no such process");
		return buf;
	}
	if (r)
		return NULL;
	if (flags & PF_KTHREAD) {
		snprintf(buf, len, "is a kernel thread (nothing in user space to trace)");
		return buf;
	}
	if (state == 'Z' || state == 'X') {
		snprintf(buf, len, "is a zombie (it has exited; its parent has not reaped it)");
		return buf;
	}
	pid_t tracer = tracer_of(pid, name, sizeof(name));
	if (tracer > 0 && tracer != getpid()) {
		snprintf(buf, len, "already traced by pid %d (%s); detach that debugger first", tracer,
			 name[0] ? name : "?");
		return buf;
	}
	return NULL;
}

static const char *seize_error(pid_t pid, int err, char *buf, size_t len)
{
	const char *why = gb_pid_problem(pid, buf, len);
	if (why)
		return why;
	if (err != EPERM) {
		snprintf(buf, len, "cannot attach: %s", strerror(err));
		return buf;
	}
	/* EPERM: say what refused it, from what can be read. */
	uint64_t ours = 0, theirs = 0, scope = 0;
	bool can_ptrace = gb_proc_status_num(0, "CapEff", 16, &ours) == 0 && (ours >> CAP_SYS_PTRACE & 1);
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	bool yama = f && fscanf(f, "%" SCNu64, &scope) == 1;
	if (f)
		fclose(f);
	if (yama && scope == 3)
		snprintf(buf, len, "permission denied: /proc/sys/kernel/yama/ptrace_scope is 3 (no "
				   "process may attach to another until reboot)");
	else if (!can_ptrace)
		snprintf(buf, len, "permission denied: gebpf lacks CAP_SYS_PTRACE (run as root)%s",
			 yama && scope ? "; /proc/sys/kernel/yama/ptrace_scope also restricts attaching" : "");
	else if (gb_proc_status_num(pid, "CapPrm", 16, &theirs) == 0 && (theirs & ~ours))
		snprintf(buf, len, "permission denied by the kernel although gebpf has CAP_SYS_PTRACE: "
				   "%s holds capabilities gebpf lacks (its CapPrm %" PRIx64 ", gebpf's CapEff "
				   "%" PRIx64 ")", pid == 1 ? "pid 1 (init)" : "the target", theirs, ours);
	else
		snprintf(buf, len, "permission denied by the kernel although gebpf has CAP_SYS_PTRACE "
				   "(a security module, or the target is in a user namespace gebpf is not "
				   "privileged over)");
	return buf;
}

/* A child forked at the moment of the attach (auto-attached by the
 * options the parent was seized with): let go untraced at its first stop. */
static void let_go_new_child(pid_t child)
{
	struct gb_stop st;
	if (gb_wait(child, 0, &st, false) == 0 && st.kind != GB_STOP_EXITED &&
	    st.kind != GB_STOP_KILLED)
		ptrace(PTRACE_DETACH, child, 0, 0);
}

/* th was seized inside a syscall and stopped at its event (fork, vfork,
 * clone, exec): its return value is written only at its exit (rax still
 * holds -ENOSYS), so it runs to its syscall-exit stop, on an instruction
 * boundary with the call's result, as a stop anywhere else leaves it.  A
 * step from the event stop would report before the next instruction ran,
 * and an injected call would restore the -ENOSYS (the program saw its
 * fork fail). */
static void finish_call(struct gb_tracee *t, struct gb_thread *th)
{
	for (int n = 0; n < 16; n++) {
		struct gb_stop st;
		if (ptrace(PTRACE_SYSCALL, th->tid, 0, 0) || gb_wait(th->tid, 0, &st, false))
			return;
		switch (st.kind) {
		case GB_STOP_EXITED:
		case GB_STOP_KILLED:
			th->exited = true;
			return;
		case GB_STOP_SYSCALL:
			if (st.sys_exit)
				return;
			break;
		case GB_STOP_SIGNAL:
			th->pending_sig = st.sig; /* (after the exit: it comes last) */
			return;
		case GB_STOP_EVENT:
			if (st.event == PTRACE_EVENT_CLONE)
				gb_tracee_add_thread(t, (pid_t)st.msg);
			break;
		default:
			break;
		}
	}
}

/* Wait for tid's first stop after SEIZE+INTERRUPT, keeping any signal that
 * was on its way so detach can deliver it. */
static int wait_first_stop(struct gb_tracee *t, struct gb_thread *th)
{
	for (;;) {
		struct gb_stop st;
		int r = gb_wait(th->tid, 0, &st, false);
		if (r)
			return r;
		switch (st.kind) {
		case GB_STOP_EXITED:
		case GB_STOP_KILLED:
			th->exited = true;
			return -ESRCH;
		case GB_STOP_SIGNAL:
			/* A signal was being delivered: keep it, it stays stopped. */
			th->pending_sig = st.sig;
			th->stopped = true;
			return 0;
		case GB_STOP_EVENT:
			/* Stopped at a clone event: the new thread (auto-attached)
			 * is traced, a new process let go. */
			if (st.event == PTRACE_EVENT_CLONE)
				gb_tracee_add_thread(t, (pid_t)st.msg);
			else if (st.event == PTRACE_EVENT_FORK || st.event == PTRACE_EVENT_VFORK)
				let_go_new_child((pid_t)st.msg);
			th->stopped = true;
			if (st.event != PTRACE_EVENT_EXIT)
				finish_call(t, th);
			return th->exited ? -ESRCH : 0;
		case GB_STOP_GROUP:
			/* Its process is stopped by job control (or being
			 * stopped): the interrupt comes as a group-stop. */
			th->group_stop = true;
			if (!t->stopped_by)
				t->stopped_by = st.sig;
			th->stopped = true;
			return 0;
		default:
			th->stopped = true;
			return 0;
		}
	}
}

static int scan_tasks(struct gb_tracee *t, int opts, int *added)
{
	char why[256];
	pid_t *tids;
	size_t n;
	int r = gb_proc_tasks(t->pid, &tids, &n);
	*added = 0;
	if (r)
		return r;
	for (size_t i = 0; i < n; i++) {
		pid_t tid = tids[i];
		if (gb_tracee_thread(t, tid))
			continue;
		if (ptrace(PTRACE_SEIZE, tid, 0, opts)) {
			int e = errno;
			if (e == ESRCH && tid != t->pid)
				continue; /* thread exited meanwhile */
			if (tid == t->pid) {
				free(tids);
				gb_err("pid %d: %s", t->pid, seize_error(t->pid, e, why, sizeof(why)));
				return -e;
			}
			if (e == EPERM)
				; /* auto-attached through TRACECLONE already: track it */
			else
				continue;
		} else if (ptrace(PTRACE_INTERRUPT, tid, 0, 0)) {
			continue;
		}
		gb_tracee_add_thread(t, tid);
		(*added)++;
	}
	free(tids);
	return 0;
}

int gb_tracee_attach(pid_t pid, struct gb_tracee *t)
{
	char why[256];
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	const char *problem = gb_pid_problem(pid, why, sizeof(why));
	if (problem) {
		gb_err("pid %d: %s", pid, problem);
		return -ESRCH;
	}
	t->stopped_at = gb_mono_s();
	/* Rescan until two consecutive passes find no new thread. */
	int quiet = 0, added, r;
	while (quiet < 2) {
		r = scan_tasks(t, SEIZE_OPTS, &added);
		if (r) {
			gb_tracee_detach(t);
			return r;
		}
		quiet = added ? 0 : quiet + 1;
	}
	for (size_t i = 0; i < t->nthreads; i++) {
		struct gb_thread *th = &t->threads[i];
		if (!th->stopped && !th->exited)
			wait_first_stop(t, th);
		/* wait_first_stop may add threads: the loop bound rereads nthreads. */
	}
	return 0;
}

static int launch_traced(const struct gb_launch_opts *o, struct gb_tracee *t, int pfd[2], pid_t pid);

static int launch_in_pidns(const struct gb_launch_opts *o, struct gb_tracee *t, int pfd[2])
{
	pid_t keeper = 0;
	pid_t pid = gb_pidns_start(o, pfd[1], &keeper);
	close(pfd[1]);
	if (pid < 0) {
		int e = 0;
		if (read(pfd[0], &e, sizeof(e)) != (ssize_t)sizeof(e) || !e)
			e = (int)-pid;
		gb_err("launch: %s in a new pid namespace as pid %d: %s", o->argv[0], (int)o->ns_pid,
		       strerror(e));
		if (keeper > 0) {
			kill(keeper, SIGKILL);
			waitpid(keeper, NULL, 0);
		}
		close(pfd[0]);
		return -e;
	}
	t->pid = pid;
	t->launched = true;
	t->keeper = keeper;
	return launch_traced(o, t, pfd, pid);
}

int gb_tracee_launch(const struct gb_launch_opts *o, struct gb_tracee *t)
{
	int pfd[2];
	memset(t, 0, sizeof(*t));
	if (pipe2(pfd, O_CLOEXEC)) {
		gb_err("launch: pipe: %s", strerror(errno));
		return -errno;
	}
	if (o->ns_pid > 0)
		return launch_in_pidns(o, t, pfd);
	pid_t pid = fork();
	if (pid < 0) {
		gb_err("launch: fork: %s", strerror(errno));
		return -errno;
	}
	if (pid == 0) {
		close(pfd[0]);
		if (!o->aslr) {
			int pers = personality(0xffffffff);
			if (pers != -1)
				personality((unsigned long)pers | ADDR_NO_RANDOMIZE);
		}
		raise(SIGSTOP);
		execvp(o->argv[0], o->argv);
		int e = errno;
		if (write(pfd[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(pfd[1]);
	t->pid = pid;
	t->launched = true;
	int status;
	if (waitpid(pid, &status, WUNTRACED) != pid || !WIFSTOPPED(status)) {
		gb_err("launch: %s: child did not start", o->argv[0]);
		close(pfd[0]);
		return -ECHILD;
	}
	return launch_traced(o, t, pfd, pid);
}

/* The launched child pid, stopped by its SIGSTOP before its exec: traced,
 * then run to its first instruction. */
static int launch_traced(const struct gb_launch_opts *o, struct gb_tracee *t, int pfd[2], pid_t pid)
{
	int status;
	if (ptrace(PTRACE_SEIZE, pid, 0, SEIZE_OPTS | PTRACE_O_EXITKILL)) {
		int e = errno;
		gb_err("launch: %s: cannot trace the child: %s", o->argv[0], strerror(e));
		kill(pid, SIGKILL);
		waitpid(t->keeper ? t->keeper : pid, &status, 0);
		close(pfd[0]);
		return -e;
	}
	gb_tracee_add_thread(t, pid);
	kill(pid, SIGCONT); /* leave the group-stop for good */
	for (;;) {
		struct gb_stop st;
		if (gb_wait(pid, 0, &st, false))
			break;
		if (st.kind == GB_STOP_EXITED || st.kind == GB_STOP_KILLED) {
			int e = 0;
			if (read(pfd[0], &e, sizeof(e)) == (ssize_t)sizeof(e) && e)
				gb_err("launch: %s: %s", o->argv[0], strerror(e));
			else
				gb_err("launch: %s: exited before it started", o->argv[0]);
			close(pfd[0]);
			t->exited = true;
			gb_tracee_free(t);
			return e == ENOENT ? -ENOENT : -ECHILD;
		}
		if (st.kind == GB_STOP_EVENT && st.event == PTRACE_EVENT_EXEC) {
			/* Still inside execve: one step finishes the syscall (the
			 * trap comes at its exit, before the first instruction),
			 * leaving the tracee on an instruction boundary. */
			ptrace(PTRACE_SINGLESTEP, pid, 0, 0);
			if (gb_wait(pid, 0, &st, false) || st.kind != GB_STOP_STEP) {
				gb_err("launch: %s: unexpected %s stop after exec", o->argv[0],
				       gb_stop_kind_name(st.kind));
				close(pfd[0]);
				gb_tracee_kill(t);
				return -ECHILD;
			}
			t->threads[0].stopped = true;
			close(pfd[0]);
			return 0;
		}
		int inject = (st.kind == GB_STOP_SIGNAL && st.sig != SIGSTOP && st.sig != SIGCONT) ? st.sig : 0;
		ptrace(PTRACE_CONT, pid, 0, inject);
	}
	close(pfd[0]);
	gb_err("launch: %s: lost the child", o->argv[0]);
	return -ECHILD;
}

static void restore_affinity(struct gb_tracee *t)
{
	if (!t->affinity_saved)
		return;
	for (size_t i = 0; i < t->nthreads; i++)
		if (!t->threads[i].exited)
			sched_setaffinity(t->threads[i].tid, sizeof(t->saved_affinity), &t->saved_affinity);
	t->affinity_saved = false;
}

/* A signal a tracer leaves queued behind it that must never reach the
 * program (docs/trace.md, "How it works": the page-trap bullets):
 * - a single-step report: SIGTRAP with TRAP_TRACE, or TRAP_BRKPT for a
 *   thread stepped into a syscall (queued at the syscall's exit, e.g. when
 *   it was interrupted out of a blocking one);
 * - the fetch fault of a protection since lifted: SIGSEGV, SEGV_ACCERR, at
 *   rip or where the instruction at rip crosses onto the next page, on a
 *   page that is executable now (a page trap's fault taken as the thread
 *   was being stopped).  Run again, the instruction no longer faults. */
static bool stale_signal(pid_t pid, const siginfo_t *si, uint64_t rip)
{
	if (si->si_signo == SIGTRAP)
		return si->si_code == TRAP_TRACE || si->si_code == TRAP_BRKPT;
	if (si->si_signo != SIGSEGV || si->si_code != SEGV_ACCERR)
		return false;
	uint64_t f = (uint64_t)(uintptr_t)si->si_addr;
	if (f != rip && !(f > rip && f < rip + 15 && f == gb_page_down(f)))
		return false;
	struct gb_vmaq *q = gb_vmaq__open(pid);
	struct gb_vma v;
	bool exec = q && gb_vmaq__find(q, f, false, &v) == 0 && (v.prot & PROT_EXEC);
	gb_vmaq__close(q);
	return exec;
}

/* The first stale signal queued for stopped thread tid (0: none). */
static int queued_stale(pid_t pid, pid_t tid)
{
	siginfo_t q[8];
	struct __ptrace_peeksiginfo_args a = { .off = 0, .flags = 0, .nr = 8 };
	struct user_regs_struct r;
	uint64_t blocked = 0;
	long n = ptrace(PTRACE_PEEKSIGINFO, tid, &a, q);
	if (n <= 0 || gb_regs_get(tid, &r) || gb_proc_status_num(tid, "SigBlk", 16, &blocked))
		return 0;
	/* (Faults and step traps are forced: never blocked.  A blocked one
	 * would not stop the thread, which would run on: leave it.) */
	for (long i = 0; i < n; i++)
		if (stale_signal(pid, &q[i], r.rip) && !(blocked >> (q[i].si_signo - 1) & 1))
			return q[i].si_signo;
	return 0;
}

/* Let stopped thread th dequeue each stale signal (it comes back as a
 * signal-delivery-stop before the thread runs a single instruction: queued
 * faults and traps are dequeued first) and drop it; its own pending signal
 * is delivered on the way, as detach would have. */
static void drop_stale(struct gb_tracee *t, struct gb_thread *th)
{
	for (int round = 0; round < 8; round++) {
		int sig = queued_stale(t->pid, th->tid);
		if (!sig)
			return;
		struct gb_stop st;
		bool interrupted;
		if (ptrace(PTRACE_CONT, th->tid, 0, th->pending_sig) ||
		    gb_wait_resumed(th->tid, &st, &interrupted)) {
			th->exited = true; /* gone: nothing to detach */
			return;
		}
		if (interrupted && gb_stop_is_interrupt(&st))
			return; /* stopped for the end before it took it (frozen?) */
		th->pending_sig = 0;
		switch (st.kind) {
		case GB_STOP_EXITED:
		case GB_STOP_KILLED:
			th->exited = true;
			return;
		case GB_STOP_STEP:
		case GB_STOP_SIGNAL:
			if (st.sig != sig)
				th->pending_sig = st.sig; /* something else came first: keep it */
			break;
		default:
			break; /* an interrupt or event stop on the way: look again */
		}
	}
}

void gb_tracee_detach(struct gb_tracee *t)
{
	if (!t->threads)
		return;
	if (t->stopped_at > 0 && t->say_windows)
		gb_info("trace: pid %d stopped %.1f ms for the end", t->pid,
			(gb_mono_s() - t->stopped_at) * 1e3);
	restore_affinity(t);
	for (size_t i = 0; i < t->nthreads; i++) {
		struct gb_thread *th = &t->threads[i];
		if (th->exited)
			continue;
		if (!th->stopped) {
			/* PTRACE_DETACH needs a stopped tracee. */
			if (ptrace(PTRACE_INTERRUPT, th->tid, 0, 0) == 0)
				wait_first_stop(t, th);
			if (th->exited)
				continue;
		}
		drop_stale(t, th);
		if (th->exited)
			continue;
		struct user_regs_struct r;
		if (t->zero_gs && !th->keep_gs && gb_regs_get(th->tid, &r) == 0 && r.gs_base) {
			r.gs_base = 0;
			gb_regs_set(th->tid, &r);
		}
		ptrace(PTRACE_DETACH, th->tid, 0, th->pending_sig);
		th->stopped = false;
	}
	gb_tracee_free(t);
}

void gb_tracee_kill(struct gb_tracee *t)
{
	if (t->pid > 0 && !t->exited) {
		kill(t->pid, SIGKILL);
		/* gb_wait: the leader of a killed multi-threaded process reports
		 * only once its other (traced) threads are reaped. */
		struct gb_stop st;
		while (gb_wait(t->pid, 0, &st, false) == 0 && st.kind != GB_STOP_EXITED &&
		       st.kind != GB_STOP_KILLED)
			;
		t->exited = true;
	}
	if (t->keeper > 0) { /* (it ends as the process ended) */
		waitpid(t->keeper, NULL, 0);
		t->keeper = 0;
	}
	gb_tracee_free(t);
}

void gb_tracee_pin_thread(struct gb_tracee *t, pid_t tid, bool on)
{
	if (!t->affinity_saved)
		return;
	if (!on) {
		sched_setaffinity(tid, sizeof(t->saved_affinity), &t->saved_affinity);
		return;
	}
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(t->pin_cpu, &one);
	sched_setaffinity(tid, sizeof(one), &one);
}

void gb_tracee_pin(struct gb_tracee *t, bool all_threads)
{
	if (t->affinity_saved || !t->nthreads)
		return;
	if (sched_getaffinity(t->pid, sizeof(t->saved_affinity), &t->saved_affinity))
		return;
	/* Our CPU, or the target's first allowed one if ours is not. */
	int cpu = gb_cpu_pick(&t->saved_affinity, sched_getcpu());
	if (cpu < 0)
		return;
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		return;
	t->pin_cpu = cpu;
	t->affinity_saved = true;
	for (size_t i = 0; all_threads && i < t->nthreads; i++)
		if (!t->threads[i].exited)
			gb_tracee_pin_thread(t, t->threads[i].tid, true);
}
