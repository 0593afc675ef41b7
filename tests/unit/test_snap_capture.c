/* gb_snapshot_capture against a real stopped process: what it holds matches
 * the live process, and a process that is gone gives a clear error.  Needs
 * ptrace (root or CAP_SYS_PTRACE): skipped with the reason otherwise. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
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
