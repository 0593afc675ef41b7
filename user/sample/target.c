/* The sampled process, launched behind a gate or attached: target.h. */
#include "sample/target.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/guard.h"
#include "common/log.h"
#include "ptrace/procfs.h"

#define PF_KTHREAD 0x00200000   /* include/linux/sched.h */

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

struct gb_target {
	pid_t pid;
	bool launched, released, exited;
	bool held;        /* stopped by ptrace right after its exec, until go() */
	int status;
	int gate_fd;      /* write end: one byte lets the child exec */
	int exec_fd;      /* read end: EOF = exec done, an int = its errno */
	int pidfd;
	char cmd[256];
};

static void open_pidfd(struct gb_target *t)
{
	t->pidfd = (int)syscall(SYS_pidfd_open, t->pid, 0);
	if (t->pidfd >= 0)
		fcntl(t->pidfd, F_SETFD, FD_CLOEXEC);
}

struct gb_target *gb_target__launch(char *const *argv, bool aslr)
{
	int gate[2] = { -1, -1 }, ex[2] = { -1, -1 };
	struct gb_target *t = calloc(1, sizeof(*t));

	if (!t || pipe2(gate, O_CLOEXEC) || pipe2(ex, O_CLOEXEC)) {
		gb_err("sample: %s: %s", argv[0], strerror(errno));
		goto fail;
	}
	snprintf(t->cmd, sizeof(t->cmd), "%s", argv[0]);
	t->pid = fork();
	if (t->pid < 0) {
		gb_err("sample: %s: fork: %s", argv[0], strerror(errno));
		goto fail;
	}
	if (t->pid == 0) {
		char c;
		int e;
		close(gate[1]);
		close(ex[0]);
		/* The parent dies: so do we (it can no longer unload for us). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (read(gate[0], &c, 1) != 1)
			_exit(127);
		/* Stop right after the exec (a SIGTRAP for the parent), so the
		 * probes are armed before the program's first instruction. */
		if (ptrace(PTRACE_TRACEME, 0, 0, 0))
			_exit(127);
		if (!aslr)
			personality(personality(0xffffffff) | ADDR_NO_RANDOMIZE);
		execvp(argv[0], argv);
		e = errno;
		if (write(ex[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(gate[0]);
	close(ex[1]);
	t->gate_fd = gate[1];
	t->exec_fd = ex[0];
	t->launched = true;
	t->status = -1;
	open_pidfd(t);
	return t;
fail:
	for (int i = 0; i < 2; i++) {
		if (gate[i] >= 0)
			close(gate[i]);
		if (ex[i] >= 0)
			close(ex[i]);
	}
	free(t);
	return NULL;
}

struct gb_target *gb_target__attach(pid_t pid)
{
	char state = 0;
	unsigned long flags = 0;
	struct gb_target *t;

	/* A stat that cannot be read proves nothing: only a pid that does not
	 * exist is refused for it. */
	if (gb_proc_stat(pid, &state, &flags)) {
		state = 0;
		flags = 0;
		if (kill(pid, 0) && errno == ESRCH) {
			gb_err("sample: pid %d: no such process", pid);
			return NULL;
		}
	}
	if (flags & PF_KTHREAD) {
		gb_err("sample: pid %d: is a kernel thread (nothing in user space to sample)", pid);
		return NULL;
	}
	if (state == 'Z' || state == 'X') {
		gb_err("sample: pid %d: process has exited (zombie)", pid);
		return NULL;
	}
	if (gb_guard_self(pid)) {
		gb_err("sample: pid %d: is gebpf itself; it does not sample itself", pid);
		return NULL;
	}
	/* Stopped by job control (Ctrl-Z, SIGSTOP): sampled as it is, which
	 * is not at all until it gets SIGCONT (docs/sample.md). */
	if (state == 'T')
		gb_warn("sample: pid %d is stopped (job control): no samples until it gets SIGCONT", pid);
	t = calloc(1, sizeof(*t));
	if (!t) {
		gb_err("sample: %s", strerror(ENOMEM));
		return NULL;
	}
	t->pid = pid;
	t->gate_fd = t->exec_fd = -1;
	t->released = true;
	t->status = -1;
	open_pidfd(t);
	return t;
}

pid_t gb_target__pid(const struct gb_target *t) { return t->pid; }
bool gb_target__launched(const struct gb_target *t) { return t->launched; }
int gb_target__fd(const struct gb_target *t) { return t->pidfd; }

int gb_target__release(struct gb_target *t)
{
	int e = 0;
	ssize_t n;

	if (!t->launched || t->released)
		return 0;
	t->released = true;
	if (write(t->gate_fd, "g", 1) != 1) {
		gb_err("sample: %s: starting pid %d: %s", t->cmd, t->pid, strerror(errno));
		return -errno;
	}
	close(t->gate_fd);
	t->gate_fd = -1;
	do
		n = read(t->exec_fd, &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close(t->exec_fd);
	t->exec_fd = -1;
	if (n == (ssize_t)sizeof(e)) {
		gb_err("sample: %s: cannot execute: %s", t->cmd, strerror(e));
		gb_target__exited(t);
		return -e;
	}
	int st;
	while (waitpid(t->pid, &st, __WALL) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFSTOPPED(st)) {
		t->exited = true;
		t->status = st;
		return 0;
	}
	t->held = true;
	return 0;
}

void gb_target__go(struct gb_target *t)
{
	if (!t->held)
		return;
	t->held = false;
	ptrace(PTRACE_DETACH, t->pid, 0, 0);
}

bool gb_target__exited(struct gb_target *t)
{
	int st;

	if (t->exited)
		return true;
	if (t->launched) {
		pid_t r = waitpid(t->pid, &st, WNOHANG);
		if (r == t->pid || (r < 0 && errno == ECHILD)) {
			t->exited = true;
			t->status = r == t->pid ? st : -1;
		}
		return t->exited;
	}
	if (kill(t->pid, 0) && errno == ESRCH)
		t->exited = true;
	else if (t->pidfd >= 0) {
		/* A pidfd reads as ready once the process is gone, even if
		 * another parent has not reaped it yet. */
		struct timeval tv = { 0, 0 };
		fd_set rd;
		FD_ZERO(&rd);
		FD_SET(t->pidfd, &rd);
		if (select(t->pidfd + 1, &rd, NULL, NULL, &tv) > 0)
			t->exited = true;
	}
	return t->exited;
}

void gb_target__free(struct gb_target *t)
{
	if (!t)
		return;
	if (t->launched && !gb_target__exited(t)) {
		kill(t->pid, SIGKILL);
		waitpid(t->pid, &t->status, 0);
	}
	if (t->gate_fd >= 0)
		close(t->gate_fd);
	if (t->exec_fd >= 0)
		close(t->exec_fd);
	if (t->pidfd >= 0)
		close(t->pidfd);
	free(t);
}
