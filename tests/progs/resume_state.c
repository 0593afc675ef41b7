/* What a program notices of its kernel state, for resume tests.  Usage:
 * resume_state DIR.  It sets its umask (027), working directory (DIR),
 * name ("rs-state"), RLIMIT_NOFILE soft limit (200), a SIGUSR1 and a SIGALRM
 * handler and a 20 ms ITIMER_REAL, prints "ready PID", waits in pause() for
 * 40 alarms, sends itself SIGUSR1, and prints what it sees.  A resume that
 * lost the SIGALRM handler dies of SIGALRM; one that lost the timer waits
 * forever.  Exit 0. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

static volatile sig_atomic_t alarms, usr1;

static void on_alrm(int sig)
{
	(void)sig;
	alarms++;
}

static void on_usr1(int sig)
{
	(void)sig;
	usr1++;
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	struct itimerval it = { { 0, 20000 }, { 0, 20000 } };
	struct rlimit rl;
	char cwd[4096], name[17] = { 0 };
	if (argc != 2 || chdir(argv[1]))
		return 2;
	umask(027);
	prctl(PR_SET_NAME, "rs-state");
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = 200;
	setrlimit(RLIMIT_NOFILE, &rl);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_alrm;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (alarms < 40)
		pause();
	kill(getpid(), SIGUSR1);
	mode_t m = umask(0);
	getitimer(ITIMER_REAL, &it);
	getrlimit(RLIMIT_NOFILE, &rl);
	prctl(PR_GET_NAME, name);
	if (!getcwd(cwd, sizeof(cwd)))
		return 3;
	printf("usr1 %d umask %03o cwd %s name %s nofile %llu interval %ld\n", (int)usr1, (unsigned)m,
	       cwd, name, (unsigned long long)rl.rlim_cur, (long)it.it_interval.tv_usec);
	return 0;
}
