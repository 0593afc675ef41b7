/* The stub (ptrace/clonestub.h): the copy's clone, on a real process
 * blocked in nanosleep with a signal of its own blocked: the copy is
 * reported, stopped before its first instruction with every blockable
 * signal blocked, and the thread gets back exactly its registers (a syscall
 * to restart included), its signal mask and the vDSO's bytes.  Needs ptrace
 * (root or CAP_SYS_PTRACE): skipped with the reason otherwise. */
#include <criterion/criterion.h>
#include <errno.h>
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

#include "ptrace/inject.h"
#include "ptrace/maps.h"
#include "ptrace/mem.h"
#include "ptrace/regs.h"
#include "ptrace/tracee.h"
#include "ptrace/clonestub.h"

static pid_t sleeper(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		sigset_t s;
		sigemptyset(&s);
		sigaddset(&s, SIGUSR2);
		sigprocmask(SIG_BLOCK, &s, NULL);
		struct timespec ts = { 30, 0 };
		nanosleep(&ts, NULL);
		_exit(7);
	}
	usleep(100 * 1000); /* into its nanosleep */
	return pid;
}

static void vdso(pid_t pid, uint64_t *start, uint8_t *buf, size_t len)
{
	struct gb_maps m;
	*start = 0;
	cr_assert_eq(gb_maps_read(pid, &m), 0);
	for (size_t i = 0; i < m.n; i++)
		if (!strcmp(m.v[i].path, "[vdso]") && m.v[i].end - m.v[i].start == len)
			*start = m.v[i].start;
	gb_maps_free(&m);
	cr_assert(*start, "no 8 KiB [vdso] in pid %d", pid);
	cr_assert_eq(gb_mem_read(pid, *start, buf, len), (ssize_t)len);
}

static unsigned long long sigblk(pid_t pid)
{
	char path[64], line[256];
	unsigned long long v = 0;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	FILE *f = fopen(path, "r");
	cr_assert(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "SigBlk: %llx", &v) == 1)
			break;
	fclose(f);
	return v;
}

Test(snap_clonestub, copy_stopped_and_thread_as_it_was)
{
	struct gb_tracee t;
	pid_t pid = sleeper();
	if (gb_tracee_attach(pid, &t)) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		cr_skip_test("cannot attach with ptrace here (needs CAP_SYS_PTRACE)");
	}
	struct user_regs_struct before, after;
	uint64_t mask_before, mask_after, vs, vs2;
	static uint8_t v_before[8192], v_after[8192];
	cr_assert_eq(gb_regs_get(pid, &before), 0);
	cr_assert_eq(ptrace(PTRACE_GETSIGMASK, pid, 8, &mask_before), 0);
	vdso(pid, &vs, v_before, sizeof(v_before));
	cr_assert((long long)before.orig_rax == SYS_clock_nanosleep || (long long)before.orig_rax == SYS_nanosleep,
		  "not stopped in its nanosleep (syscall %lld)", (long long)before.orig_rax);
	cr_assert_eq((long long)before.rax, -516, "not an interrupted sleep (ERESTART_RESTARTBLOCK)");

	long ret = 0;
	pid_t child = 0;
	int pending = 0;
	uint64_t insn = gb_inject_find_syscall(pid, NULL, NULL);
	cr_assert(insn);
	int r = gb_snap_clone_stub(pid, pid, insn, &ret, &child, &pending);
	cr_assert_eq(r, 0, "clone stub: %s", strerror(-r));
	cr_assert_gt(ret, 0);
	cr_assert_eq(child, (pid_t)ret);
	int st;
	cr_assert_eq(waitpid(child, &st, __WALL), child);
	cr_assert(WIFSTOPPED(st), "the copy did not start in a ptrace stop (status 0x%x)", st);
	/* Every signal but SIGKILL and SIGSTOP blocked in the copy. */
	cr_assert_eq(sigblk(child), ~((1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1))),
		     "copy's SigBlk %llx", sigblk(child));
	kill(child, SIGKILL);
	waitpid(child, &st, __WALL);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

	cr_assert_eq(gb_regs_get(pid, &after), 0);
	cr_assert_eq(memcmp(&before, &after, sizeof(before)), 0, "registers changed (rip %llx -> %llx)",
		     before.rip, after.rip);
	cr_assert_eq(ptrace(PTRACE_GETSIGMASK, pid, 8, &mask_after), 0);
	cr_assert_eq(mask_after, mask_before);
	vdso(pid, &vs2, v_after, sizeof(v_after));
	cr_assert_eq(vs2, vs);
	cr_assert_eq(memcmp(v_before, v_after, sizeof(v_before)), 0, "the vDSO's bytes changed");
	cr_assert_eq(pending, 0);
	/* Let it go: it sleeps on (its nanosleep restarted). */
	gb_tracee_detach(&t);
	usleep(50 * 1000);
	char path[64];
	long nr = -1;
	snprintf(path, sizeof(path), "/proc/%d/syscall", pid);
	FILE *f = fopen(path, "r");
	cr_assert(f && fscanf(f, "%ld", &nr) == 1);
	fclose(f);
	cr_assert(nr == (long)before.orig_rax || nr == SYS_restart_syscall, "in syscall %ld, not asleep", nr);
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

/* Any call through the stub (gb_snap_stub_call), in a process stopped in
 * sigsuspend: the call's result, no copy, and afterwards the process still
 * in sigsuspend with its temporary mask and, once woken by a signal of its
 * own, with its own mask (it checks and exits 0). */
static volatile sig_atomic_t woke;
static uint64_t tid_word;

static void on_usr2(int sig) { (void)sig; woke = 1; }

static pid_t suspender(uint64_t *own)
{
	sigset_t s, wait;
	sigemptyset(&s);
	sigaddset(&s, SIGUSR2);
	sigaddset(&s, SIGHUP);
	memcpy(own, &s, sizeof(*own));
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* not left behind by a failed assertion */
		signal(SIGUSR2, on_usr2);
		sigprocmask(SIG_BLOCK, &s, NULL);
		sigfillset(&wait);
		sigdelset(&wait, SIGUSR2);
		while (!woke)
			sigsuspend(&wait);
		sigset_t now;
		sigprocmask(SIG_BLOCK, NULL, &now);
		_exit(memcmp(&now, &s, sizeof(*own)) ? 3 : 0);
	}
	usleep(100 * 1000); /* into its sigsuspend */
	return pid;
}

/* suspender(), attached (the test is skipped where ptrace is not allowed). */
static pid_t attached_suspender(struct gb_tracee *t, uint64_t *own)
{
	pid_t pid = suspender(own);
	if (gb_tracee_attach(pid, t)) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		cr_skip_test("cannot attach with ptrace here (needs CAP_SYS_PTRACE)");
	}
	return pid;
}

Test(snap_clonestub, any_call_and_sigsuspend_as_it_was)
{
	struct gb_tracee t;
	uint64_t own;
	pid_t pid = attached_suspender(&t, &own);
	struct user_regs_struct before, after;
	cr_assert_eq(gb_regs_get(pid, &before), 0);
	cr_assert_eq((long long)before.orig_rax, SYS_rt_sigsuspend, "not in its sigsuspend");
	long ret = -1;
	pid_t child = 0;
	int pending = 0;
	const uint64_t gp[6] = { 0 };
	int r = gb_snap_stub_call(pid, pid, 0, SYS_getpid, gp, &ret, &child, &pending);
	cr_assert_eq(r, 0, "stub: %s", strerror(-r));
	cr_assert_eq(ret, pid);
	cr_assert_eq(child, 0);
	uint64_t word = 1, at = (uint64_t)(uintptr_t)&tid_word; /* the same address in the fork */
	const uint64_t tp[6] = { 40 /* PR_GET_TID_ADDRESS */, at, 0, 0, 0, 0 };
	r = gb_snap_stub_call(pid, pid, 0, SYS_prctl, tp, &ret, &child, &pending);
	cr_assert_eq(r, 0, "stub: %s", strerror(-r));
	cr_assert_eq(ret, 0);
	cr_assert_eq(gb_mem_read(pid, at, &word, sizeof(word)), (ssize_t)sizeof(word));
	/* glibc's fork sets it (CLONE_CHILD_CLEARTID: its struct pthread's tid). */
	cr_assert(word != 1 && word != 0, "clear_child_tid not written (%llx)", (unsigned long long)word);
	cr_assert_eq(gb_regs_get(pid, &after), 0);
	cr_assert_eq(memcmp(&before, &after, sizeof(before)), 0, "registers changed");
	cr_assert_eq(pending, 0);
	gb_tracee_detach(&t);
	usleep(50 * 1000);
	sigset_t wait;
	uint64_t want;
	sigfillset(&wait); /* glibc leaves out its own two signals */
	sigdelset(&wait, SIGUSR2);
	memcpy(&want, &wait, sizeof(want));
	want &= ~((1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1)));
	cr_assert_eq(sigblk(pid), want, "not back in sigsuspend's mask: SigBlk %llx", sigblk(pid));
	kill(pid, SIGUSR2);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x (3: its own mask not back)", st);
}

/* A signal sent to the process while it is stopped in sigsuspend, taken
 * by the kernel as the thread leaves its stop for the stub: delivered on
 * the thread's own registers (never kept by gebpf, which could not give it
 * back where the stub ends), so once released the handler runs and the
 * sigsuspend it interrupted returns: the process exits 0 by itself. */
Test(snap_clonestub, signal_sent_during_the_stop_wakes_the_sigsuspend)
{
	struct gb_tracee t;
	uint64_t own;
	pid_t pid = attached_suspender(&t, &own);
	cr_assert_eq(kill(pid, SIGUSR2), 0);
	long ret = -1;
	pid_t child = 0;
	const uint64_t gp[6] = { 0 };
	int r = gb_snap_stub_call(pid, pid, 0, SYS_getpid, gp, &ret, &child, &t.threads[0].pending_sig);
	cr_assert_eq(r, 0, "stub: %s", strerror(-r));
	cr_assert_eq(ret, pid);
	cr_assert_eq(t.threads[0].pending_sig, 0, "signal %d kept by gebpf", t.threads[0].pending_sig);
	gb_tracee_detach(&t);
	int st = 0;
	pid_t w = 0;
	for (int i = 0; i < 200 && w == 0; i++) {
		w = waitpid(pid, &st, WNOHANG);
		if (w == 0)
			usleep(10 * 1000);
	}
	if (w == 0)
		kill(pid, SIGKILL), waitpid(pid, NULL, 0);
	cr_assert_eq(w, pid, "still in sigsuspend 2 s after release: its SIGUSR2 was lost");
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x (3: its own mask not back)", st);
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

/* A process stopped by SIGSTOP (docs/snap.md): the stub runs a call in it
 * and puts it back (its interrupt stop comes as a group-stop while the
 * process is stopped: the stub took it for something else and resumed the
 * thread, which then ran the program and never stopped again); let go, it
 * stays stopped, and its sleep goes on after SIGCONT. */
Test(snap_clonestub, stopped_process_stays_stopped, .timeout = 30)
{
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* (a test that fails must not leave it stopped) */
		struct timespec ts = { 30, 0 };
		nanosleep(&ts, NULL);
		_exit(7);
	}
	usleep(100 * 1000); /* into its nanosleep */
	struct gb_tracee t;
	kill(pid, SIGSTOP);
	for (int i = 0; i < 500 && task_state(pid) != 'T'; i++)
		usleep(2000);
	cr_assert_eq(task_state(pid), 'T');
	if (gb_tracee_attach(pid, &t))
		cr_skip_test("cannot ptrace our own child (ptrace_scope?)");
	cr_assert_eq(t.stopped_by, SIGSTOP);
	struct user_regs_struct before, after;
	cr_assert_eq(gb_regs_get(pid, &before), 0);
	long ret = -1;
	pid_t child = 0;
	int pending = 0;
	const uint64_t gp[6] = { 0 };
	int r = gb_snap_stub_call(pid, pid, 0, SYS_getpid, gp, &ret, &child, &pending);
	cr_assert_eq(r, 0, "stub: %s", strerror(-r));
	cr_assert_eq(ret, pid);
	cr_assert_eq(gb_regs_get(pid, &after), 0);
	cr_assert_eq(memcmp(&before, &after, sizeof(before)), 0, "registers changed");
	gb_tracee_detach(&t);
	usleep(100 * 1000);
	cr_assert_eq(task_state(pid), 'T', "not left stopped: %c", task_state(pid));
	kill(pid, SIGCONT);
	usleep(100 * 1000);
	cr_assert_eq(task_state(pid), 'S', "not back in its sleep: %c", task_state(pid));
}
