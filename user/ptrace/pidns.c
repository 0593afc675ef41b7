/* A launch in a new pid namespace with a chosen pid (gb_launch_opts.ns_pid;
 * docs/resume.md "Pids and tids"), as CRIU restores pids: gebpf's child
 * (the keeper) unshares CLONE_NEWPID and forks the namespace's init, which
 * makes the process with clone3's set_tid = [ns_pid] and reaps it.  The
 * process raises SIGSTOP before its exec, as a plain launch's child does.
 * The init hands the process's wait status to the keeper through a pipe;
 * the keeper ends as the process did (its exit code, or the same signal),
 * so gebpf, which can wait only for its own child, waits for the keeper. */
#include "ptrace/pidns.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void child_exec(const struct gb_launch_opts *o, int errfd)
{
	if (!o->aslr) {
		int pers = personality(0xffffffff);
		if (pers != -1)
			personality((unsigned long)pers | ADDR_NO_RANDOMIZE);
	}
	raise(SIGSTOP);
	execvp(o->argv[0], o->argv);
	int e = errno;
	if (write(errfd, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

/* The namespace's init: the process at ns_pid, reaped; its status to st. */
static void init_main(const struct gb_launch_opts *o, int errfd, int stfd)
{
	pid_t want = o->ns_pid;
	struct clone_args ca;
	memset(&ca, 0, sizeof(ca));
	ca.exit_signal = SIGCHLD;
	ca.set_tid = (uint64_t)(uintptr_t)&want;
	ca.set_tid_size = 1;
	long c = syscall(SYS_clone3, &ca, sizeof(ca));
	if (c == 0)
		child_exec(o, errfd);
	if (c < 0) {
		int e = errno;
		if (write(errfd, &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	for (;;) {
		int st;
		pid_t w = wait(&st);
		if (w < 0 && errno != EINTR)
			_exit(127);
		if (w == c) {
			if (write(stfd, &st, sizeof(st)) < 0)
				_exit(127);
			_exit(0);
		}
	}
}

pid_t gb_pidns_start(const struct gb_launch_opts *o, int errfd, pid_t *keeper)
{
	int up[2], st[2];
	if (pipe2(up, O_CLOEXEC) || pipe2(st, O_CLOEXEC))
		return -errno;
	pid_t k = fork();
	if (k < 0)
		return -errno;
	if (k == 0) {
		close(up[0]);
		if (unshare(CLONE_NEWPID)) {
			int e = errno;
			if (write(errfd, &e, sizeof(e)) < 0)
				_exit(127);
			_exit(127);
		}
		pid_t i = fork();
		if (i == 0) {
			close(st[0]);
			init_main(o, errfd, st[1]);
		}
		close(st[1]); /* (the init's alone: its end tells the status) */
		if (write(up[1], &i, sizeof(i)) < 0)
			_exit(127);
		close(up[1]);
		int s = 0;
		bool got = read(st[0], &s, sizeof(s)) == (ssize_t)sizeof(s);
		while (waitpid(i, NULL, 0) < 0 && errno == EINTR)
			;
		if (!got)
			_exit(127);
		if (WIFSIGNALED(s)) {
			signal(WTERMSIG(s), SIG_DFL);
			raise(WTERMSIG(s));
		}
		_exit(WIFEXITED(s) ? WEXITSTATUS(s) : 127);
	}
	close(up[1]);
	close(st[0]);
	close(st[1]);
	*keeper = k;
	pid_t init = -1;
	ssize_t n = read(up[0], &init, sizeof(init));
	close(up[0]);
	if (n != (ssize_t)sizeof(init) || init <= 0)
		return -ECHILD;
	/* The process: the init's child, stopped by its own SIGSTOP. */
	char path[96], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", init, init);
	for (int tries = 0; tries < 2000; tries++) {
		FILE *f = fopen(path, "re");
		pid_t p = 0;
		if (f) {
			if (fscanf(f, "%d", &p) != 1)
				p = 0;
			fclose(f);
		}
		if (p > 0) {
			snprintf(path, sizeof(path), "/proc/%d/stat", p);
			for (; tries < 2000; tries++) {
				FILE *g = fopen(path, "re");
				char *r = g ? fgets(buf, sizeof(buf), g) : NULL;
				if (g)
					fclose(g);
				const char *cp = r ? strrchr(buf, ')') : NULL;
				if (!cp)
					return -ECHILD;
				if (cp[1] == ' ' && cp[2] == 'T')
					return p;
				nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
			}
			break;
		}
		if (waitpid(k, NULL, WNOHANG) == k)
			return -ECHILD; /* (unshare or clone3 refused: the errno is on errfd) */
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	return -ETIMEDOUT;
}
