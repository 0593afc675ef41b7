/* The worker process: see guard.h. */
#include "common/guard.h"

#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile pid_t worker;
static bool in_worker;

static void pass_on(int sig)
{
	if (worker > 0)
		kill(worker, sig);
}

int gb_guard(void)
{
	pid_t parent = getpid();
	gb_guard__undo_init();
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* The worker: SIGTERM when the waiting process dies (also if it
		 * died before this line). */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) == 0 && getppid() != parent)
			raise(SIGTERM);
		in_worker = true;
		return 0;
	}
	worker = pid;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = pass_on;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			_exit(1);
	if (WIFSIGNALED(status)) {
		gb_guard__undo_run();
		signal(WTERMSIG(status), SIG_DFL);
		raise(WTERMSIG(status));
		_exit(128 + WTERMSIG(status));
	}
	_exit(WEXITSTATUS(status));
}

void gb_guard_test_point(const char *name)
{
	static unsigned long passed; /* (passes of the point named there: no other counts) */
	const char *at = in_worker ? getenv("GEBPF_TEST_KILL_AT") : NULL;
	size_t len = strlen(name);
	if (!at || strncmp(at, name, len) || (at[len] && at[len] != ':'))
		return;
	unsigned long nth = at[len] == ':' ? strtoul(at + len + 1, NULL, 10) : 1;
	if (++passed == nth)
		raise(SIGKILL);
}
