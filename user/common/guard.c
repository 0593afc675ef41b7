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
static pid_t boss; /* in the worker: the process the user started */

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
		boss = parent;
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

/* The number after "key:" in /proc/PID/status (pid 0: self), or -1. */
static long status_num(pid_t pid, const char *key)
{
	char path[64], line[256];
	size_t n = strlen(key);
	long v = -1;
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

const char *gb_guard_self(pid_t pid)
{
	static const char *const me[] = { "is gebpf itself; it cannot attach to itself",
					  "is gebpf's own worker process; it cannot attach to itself" };
	static const char *const started = "is gebpf itself; it cannot attach to itself";
	if (pid <= 0)
		return NULL;
	/* In gebpf's pid namespace (ptrace's numbers). */
	if (pid == getpid())
		return me[boss > 0];
	if (boss > 0 && pid == boss)
		return started;
	/* In the namespace of the /proc it reads, where the pid's own thread
	 * group (a thread id counts as its process) is compared: our pid and
	 * our parent's as that /proc sees them (Tgid and PPid of
	 * /proc/self/status are in its namespace). */
	long tgid = status_num(pid, "Tgid");
	if (tgid <= 0)
		return NULL;
	if (tgid == status_num(0, "Tgid"))
		return me[boss > 0];
	if (boss > 0 && getppid() == boss && tgid == status_num(0, "PPid"))
		return started;
	return NULL;
}
