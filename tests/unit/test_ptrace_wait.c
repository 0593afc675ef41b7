/* The ptrace room's waits and detach against real children (needs ptrace
 * rights over our own children: skipped with the reason otherwise):
 * - a wait for the leader of a SIGKILLed multi-threaded process returns
 *   (its exit is never reported while its zombie threads are unreaped);
 * - SIGTERM ends a wait for a thread that never stops;
 * - a thread single-stepped into a blocking syscall survives detach (no
 *   step report is left queued for it);
 * - a thread stopped after a step keeps the trap flag (its tracer dying
 *   without a detach kills it with SIGTRAP) unless gb_step_untrap took it
 *   off;
 * - a process stopped by job control is attached to, listened to and let go
 *   stopped. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/sigflag.h"
#include "ptrace/step.h"
#include "ptrace/tracee.h"
#include "ptrace/wait.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *sleeper(void *a)
{
	for (;;)
		pause();
	return a;
}

static int ntasks(pid_t pid)
{
	char path[64];
	int n = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

static pid_t spawn_threads(int extra)
{
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		pthread_t th;
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* (a test that fails must not leave it) */
		for (int k = 0; k < extra; k++)
			pthread_create(&th, NULL, sleeper, NULL);
		sleeper(NULL);
	}
	for (int i = 0; i < 500 && ntasks(pid) < extra + 1; i++)
		usleep(2000);
	cr_assert_eq(ntasks(pid), extra + 1);
	return pid;
}

static void attach(pid_t pid, struct gb_tracee *t)
{
	if (gb_tracee_attach(pid, t)) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		cr_skip_test("cannot ptrace our own child (ptrace_scope?)");
	}
}

Test(ptrace_wait, leader_of_killed_process, .timeout = 20)
{
	struct gb_tracee t;
	pid_t pid = spawn_threads(3);
	attach(pid, &t);
	cr_assert_eq(t.nthreads, 4);
	for (size_t i = 0; i < t.nthreads; i++)
		cr_assert_eq(ptrace(PTRACE_CONT, t.threads[i].tid, 0, 0), 0);
	kill(pid, SIGKILL);
	struct gb_stop st;
	double t0 = now();
	int r = gb_wait(pid, 0, &st, false);
	cr_assert(now() - t0 < 2, "gb_wait(leader) took %.1f s", now() - t0);
	cr_assert(r == -ESRCH || (r == 0 && st.kind == GB_STOP_KILLED), "r %d kind %d", r, st.kind);
	while (waitpid(-1, NULL, __WALL) > 0)
		;
	gb_tracee_free(&t);
}

static void *send_term(void *a)
{
	usleep(200000);
	kill(getpid(), SIGTERM);
	return a;
}

Test(ptrace_wait, sigterm_ends_a_wait, .timeout = 20)
{
	struct gb_tracee t;
	pid_t pid = spawn_threads(0);
	attach(pid, &t);
	cr_assert_eq(ptrace(PTRACE_CONT, pid, 0, 0), 0); /* pause()s for ever */
	gb_sigflag_install();
	pthread_t th;
	pthread_create(&th, NULL, send_term, NULL);
	struct gb_stop st;
	double t0 = now();
	int r = gb_wait(pid, 0, &st, false);
	double took = now() - t0;
	pthread_join(th, NULL);
	cr_assert_eq(r, -EINTR);
	cr_assert(took < 2.0, "a wait went on %.1f s after SIGTERM", took);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, __WALL);
	gb_tracee_free(&t);
}

Test(ptrace_wait, detach_from_a_stepped_blocking_syscall, .timeout = 30)
{
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		/* Ten 100 ms sleeps, then exit 0. */
		struct timespec ts = { 0, 100000000 };
		for (int k = 0; k < 10; k++)
			syscall(SYS_nanosleep, &ts, NULL);
		_exit(0);
	}
	struct gb_tracee t;
	attach(pid, &t);
	/* Step until a step does not come back: the thread blocks in nanosleep
	 * with a step pending. */
	struct gb_stop st;
	bool blocked = false;
	for (int i = 0; i < 100000 && !blocked; i++) {
		cr_assert_eq(ptrace(PTRACE_SINGLESTEP, pid, 0, 0), 0);
		usleep(i < 50 ? 0 : 1000);
		int r = gb_wait(pid, WNOHANG, &st, false);
		if (r == -EAGAIN) {
			usleep(30000);
			r = gb_wait(pid, WNOHANG, &st, false);
			blocked = r == -EAGAIN;
		}
		if (!blocked)
			cr_assert(r == 0 && st.kind == GB_STOP_STEP, "r %d kind %d", r, st.kind);
	}
	cr_assert(blocked, "never blocked in nanosleep");
	t.threads[0].stopped = false; /* in its syscall: detach interrupts it */
	gb_tracee_detach(&t);
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "the child died of signal %d after the detach", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* A child computing for about 0.3 s, then exit 0; stepped 200 times by a
 * tracer process that then dies (no detach), after gb_step_untrap when
 * untrap.  The child's wait status. */
static int stepped_then_orphaned(bool untrap)
{
	pid_t v = fork();
	cr_assert(v >= 0);
	if (v == 0) {
		volatile unsigned long s = 0;
		for (unsigned long k = 0; k < 300000000ul; k++)
			s += k;
		_exit(0);
	}
	pid_t tr = fork();
	cr_assert(tr >= 0);
	if (tr == 0) {
		struct gb_tracee t;
		struct gb_stop st;
		if (gb_tracee_attach(v, &t))
			_exit(77);
		for (int k = 0; k < 200; k++)
			if (gb_step(v, 0, NULL, NULL, NULL, &st) || st.kind != GB_STOP_STEP)
				_exit(3);
		if (untrap && (gb_step_untrap(v, &st) || st.kind != GB_STOP_INTERRUPT))
			_exit(4);
		_exit(0); /* the kernel lets v go, stopped or not, as it is */
	}
	int status;
	cr_assert_eq(waitpid(tr, &status, 0), tr);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
		kill(v, SIGKILL);
		waitpid(v, NULL, 0);
		cr_skip_test("cannot ptrace our own child (ptrace_scope?)");
	}
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the tracer failed (%#x)", status);
	cr_assert_eq(waitpid(v, &status, 0), v);
	return status;
}

Test(ptrace_wait, untrapped_thread_survives_its_tracer, .timeout = 60)
{
	int status = stepped_then_orphaned(false);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGTRAP,
		  "left stopped after a step by a dying tracer, the child did not die of SIGTRAP "
		  "(%#x): the premise of gb_step_untrap is gone", status);
	status = stepped_then_orphaned(true);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "untrapped, the child still died (%#x) when its tracer did", status);
}

static char task_state(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	return p && p[1] ? p[2] : 0;
}

/* The kernel's contract for a process stopped by job control (docs/trace.md
 * "A stopped process"): attached, its threads report a group-stop, and so
 * does a PTRACE_INTERRUPT while it is stopped (gb_stop_is_interrupt; the
 * stop's siginfo says the stop signal: gb_stop_event_sig); a listening
 * thread runs nothing and reports at SIGCONT, then with SIGTRAP; a detach
 * while it is stopped leaves it stopped (T). */
Test(ptrace_wait, stopped_process_stays_stopped, .timeout = 60)
{
	pid_t pid = spawn_threads(1);
	struct gb_tracee t;
	struct gb_stop st;
	kill(pid, SIGSTOP);
	for (int i = 0; i < 500 && task_state(pid) != 'T'; i++)
		usleep(2000);
	cr_assert_eq(task_state(pid), 'T');
	attach(pid, &t);
	cr_assert_eq(t.nthreads, 2);
	cr_assert_eq(t.stopped_by, SIGSTOP);
	for (size_t i = 0; i < t.nthreads; i++) {
		cr_assert(t.threads[i].stopped && t.threads[i].group_stop);
		cr_assert_eq(gb_stop_event_sig(t.threads[i].tid), SIGSTOP);
	}
	pid_t tid = t.threads[1].tid;
	/* An interrupt while stopped: a group-stop, taken for the interrupt. */
	cr_assert_eq(ptrace(PTRACE_LISTEN, tid, 0, 0), 0);
	cr_assert_eq(ptrace(PTRACE_INTERRUPT, tid, 0, 0), 0);
	cr_assert_eq(gb_wait(tid, 0, &st, false), 0);
	cr_assert(st.kind == GB_STOP_GROUP && st.sig == SIGSTOP && gb_stop_is_interrupt(&st),
		  "%s %d", gb_stop_kind_name(st.kind), st.sig);
	/* Listening, it runs nothing until SIGCONT, then reports SIGTRAP. */
	cr_assert_eq(ptrace(PTRACE_LISTEN, tid, 0, 0), 0);
	cr_assert_eq(gb_wait(tid, WNOHANG, &st, false), -EAGAIN);
	kill(pid, SIGCONT);
	cr_assert_eq(gb_wait(tid, 0, &st, false), 0);
	cr_assert(st.kind == GB_STOP_INTERRUPT && gb_stop_is_interrupt(&st), "%s %d",
		  gb_stop_kind_name(st.kind), st.sig);
	cr_assert_eq(gb_stop_event_sig(tid), SIGTRAP);
	/* Stopped again (the thread let run takes the SIGSTOP: the other one
	 * waits in its stop), then let go: it stays stopped. */
	cr_assert_eq(ptrace(PTRACE_CONT, tid, 0, 0), 0);
	kill(pid, SIGSTOP);
	for (int n = 0;; n++) {
		cr_assert_eq(gb_wait(tid, 0, &st, false), 0);
		cr_assert(st.kind == GB_STOP_SIGNAL && n < 4, "%s %d", gb_stop_kind_name(st.kind), st.sig);
		if (st.sig == SIGSTOP)
			break;
		ptrace(PTRACE_CONT, tid, 0, st.sig); /* the SIGCONT, delivered first */
	}
	t.threads[1].pending_sig = SIGSTOP; /* (delivered by the detach) */
	gb_tracee_detach(&t);
	for (int i = 0; i < 500 && task_state(pid) != 'T'; i++)
		usleep(2000);
	cr_assert_eq(task_state(pid), 'T', "not left stopped: %c", task_state(pid));
	usleep(100000);
	cr_assert_eq(task_state(pid), 'T');
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}
