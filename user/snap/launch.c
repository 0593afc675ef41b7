/* The deterministic launch environment (launch.h). */
#include "snap/launch.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cpuset.h"
#include "common/log.h"

static void pin_lowest_cpu(void)
{
	cpu_set_t set, one;
	if (sched_getaffinity(0, sizeof(set), &set))
		return;
	int c = gb_cpu_pick(&set, -1);
	if (c < 0)
		return;
	CPU_ZERO(&one);
	CPU_SET(c, &one);
	sched_setaffinity(0, sizeof(one), &one);
}

pid_t gb_snap_launch_env(bool pidns)
{
	pin_lowest_cpu();
	if (!pidns)
		return 0;
	if (unshare(CLONE_NEWPID)) {
		gb_warn("snap: cannot create a pid namespace (%s): pids will not be deterministic",
			strerror(errno));
		return 0;
	}
	pid_t init = fork();
	if (init < 0) {
		gb_warn("snap: fork of the namespace's init failed: %s", strerror(errno));
		return 0;
	}
	if (init == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;)
			pause();
	}
	return init;
}

void gb_snap_launch_env_end(pid_t init)
{
	if (init <= 0)
		return;
	kill(init, SIGKILL);
	waitpid(init, NULL, 0);
}
