/* gb_snapshot_capture against a real stopped process: what it holds matches
 * the live process, and a process that is gone gives a clear error.  Needs
 * ptrace (root or CAP_SYS_PTRACE): skipped with the reason otherwise. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptrace/mem.h"
#include "ptrace/regs.h"
#include "ptrace/tracee.h"
#include "snap/snapshot.h"

static bool launch_sleep(struct gb_tracee *t)
{
	char *argv[] = { "/bin/sleep", "30", NULL };
	struct gb_launch_opts o = { .argv = argv };
	return gb_tracee_launch(&o, t) == 0;
}

Test(snap_capture, matches_the_live_process)
{
	struct gb_tracee t;
	if (!launch_sleep(&t))
		cr_skip_test("cannot launch a tracee with ptrace here (needs CAP_SYS_PTRACE)");
	struct gb_snapshot *s;
	struct gb_snap_point pt = { .tid = t.pid, .vt = -1, .point = "exec" };
	cr_assert_eq(gb_snapshot_capture(&t, &pt, &s), 0);
	struct user_regs_struct live;
	cr_assert_eq(gb_regs_get(t.pid, &live), 0);
	cr_assert_eq(s->nthreads, 1);
	cr_assert_eq(s->threads[0].regs.rip, live.rip);
	cr_assert_eq(s->threads[0].regs.rsp, live.rsp);
	cr_assert_eq(s->meta.tid, s->meta.pid);
	cr_assert_str_eq(s->exe, "/usr/bin/sleep");
	uint8_t a[256], b[256];
	cr_assert_eq(gb_snapshot_read_memory(s, live.rsp, a, sizeof(a), "t"), 0);
	cr_assert_eq(gb_mem_read(t.pid, live.rsp, b, sizeof(b)), (ssize_t)sizeof(b));
	cr_assert_eq(memcmp(a, b, sizeof(a)), 0, "stack bytes differ from the live process");
	bool vvar = false, stack = false;
	for (size_t i = 0; i < s->nmaps; i++) {
		if (!strcmp(s->maps[i].path, "[vvar]")) {
			vvar = true;
			cr_assert(!gb_snap_map_has_bytes(&s->maps[i]), "[vvar] must be listed without bytes");
		}
		if (!strcmp(s->maps[i].path, "[stack]"))
			stack = gb_snap_map_has_bytes(&s->maps[i]);
	}
	cr_assert(vvar && stack);
	cr_assert_gt(s->auxv_len, 0);
	cr_assert_gt(s->threads[0].nframes, 0);
	cr_assert_eq(s->threads[0].frames[0].pc, live.rip);
	gb_snapshot_free(s);
	gb_tracee_kill(&t);
}

Test(snap_capture, process_gone_is_an_error, .init = cr_redirect_stderr)
{
	struct gb_tracee t;
	if (!launch_sleep(&t))
		cr_skip_test("cannot launch a tracee with ptrace here (needs CAP_SYS_PTRACE)");
	pid_t pid = t.pid;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, __WALL);
	struct gb_snapshot *s = (void *)1;
	char err[1024] = "";
	int r = gb_snapshot_capture(&t, NULL, &s);
	fflush(stderr);
	err[fread(err, 1, sizeof(err) - 1, cr_get_redirected_stderr())] = 0;
	cr_assert_eq(r, -ESRCH, "got %d (%s)", r, err);
	cr_assert_null(s);
	char want[32];
	snprintf(want, sizeof(want), "pid %d", pid);
	cr_assert(strstr(err, want), "error does not name the pid: %s", err);
	gb_tracee_free(&t);
}

static volatile sig_atomic_t got_usr1;
static void on_usr1(int sig)
{
	(void)sig;
	got_usr1 = 1;
}

/* The kernel state kstate.c reads, some of it with calls injected through
 * syscall stops, from a child blocked in pause(): its umask, SIGUSR1
 * handler, interval timer, robust list and clear_child_tid (glibc's own
 * set_tid_address); the thread's registers and the bytes below its stack
 * are as they were, no trap flag is left, and the child runs on. */
Test(snap_capture, kernel_state_of_a_paused_child)
{
	int ready[2];
	cr_assert_eq(pipe(ready), 0);
	pid_t c = fork();
	if (c == 0) {
		struct itimerval it = { { 100, 0 }, { 100, 0 } };
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_usr1;
		sigaction(SIGUSR1, &sa, NULL);
		umask(027);
		setitimer(ITIMER_REAL, &it, NULL);
		if (write(ready[1], "r", 1) != 1)
			_exit(3);
		while (!got_usr1)
			pause();
		_exit(7);
	}
	char b;
	cr_assert_eq(read(ready[0], &b, 1), 1);
	usleep(50000); /* in pause() */
	struct gb_tracee t;
	if (gb_tracee_attach(c, &t)) {
		kill(c, SIGKILL);
		waitpid(c, NULL, 0);
		cr_skip_test("cannot attach with ptrace here (needs CAP_SYS_PTRACE)");
	}
	struct user_regs_struct before, after;
	uint8_t below[512], below_after[512];
	cr_assert_eq(gb_regs_get(c, &before), 0);
	cr_assert_eq(gb_mem_read(c, before.rsp - 512, below, sizeof(below)), (ssize_t)sizeof(below));
	struct gb_snapshot *s;
	struct gb_snap_point pt = { .tid = 0, .vt = -1, .point = "attach" };
	cr_assert_eq(gb_snapshot_capture(&t, &pt, &s), 0);
	cr_assert_eq(gb_regs_get(c, &after), 0);
	cr_assert_eq(memcmp(&before, &after, sizeof(before)), 0, "registers changed by the capture");
	cr_assert_eq(gb_mem_read(c, before.rsp - 512, below_after, sizeof(below)), (ssize_t)sizeof(below));
	cr_assert_eq(memcmp(below, below_after, sizeof(below)), 0, "stack bytes changed by the capture");
	cr_assert_eq(after.eflags & 0x100, 0, "trap flag left set");
	const struct gb_snap_pstate *pk = &s->pk;
	cr_assert(pk->have & GB_PS_UMASK);
	cr_assert_eq(pk->umask, 027);
	cr_assert(pk->have & GB_PS_SIGACTS);
	cr_assert_eq(pk->sigact[SIGUSR1 - 1].handler, (uint64_t)(uintptr_t)on_usr1);
	cr_assert_eq(pk->sigact[SIGUSR2 - 1].handler, 0);
	cr_assert(pk->have & GB_PS_ITIMERS);
	cr_assert_eq(pk->itimer[ITIMER_REAL].int_sec, 100);
	cr_assert_gt(pk->itimer[ITIMER_REAL].val_sec + pk->itimer[ITIMER_REAL].val_usec, 0);
	const struct gb_snap_tstate *ks = &s->threads[0].ks;
	cr_assert(ks->have & GB_TS_TID_ADDR);
	cr_assert(ks->have & GB_TS_ROBUST);
	cr_assert_neq(ks->clear_tid, 0);
	int32_t tidword = 0;
	cr_assert_eq(gb_mem_read(c, ks->clear_tid, &tidword, 4), 4);
	cr_assert_eq(tidword, c, "clear_child_tid is not glibc's tid word");
	gb_snapshot_free(s);
	gb_tracee_detach(&t);
	kill(c, SIGUSR1);
	int st;
	cr_assert_eq(waitpid(c, &st, 0), c);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 7, "the child did not run on (status 0x%x)", st);
}
