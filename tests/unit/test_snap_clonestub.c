/* The copy's clone from the stub (snap/clonestub.h), on a real process
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
#include "snap/clonestub.h"

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
