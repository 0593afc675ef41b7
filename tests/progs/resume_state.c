/* What a program notices of its kernel state, for resume tests.  Usage:
 * resume_state DIR.  It sets its umask (027), working directory (DIR),
 * name ("rs-state"), RLIMIT_NOFILE soft limit (200), a SIGUSR1 and a SIGALRM
 * handler and a 20 ms ITIMER_REAL; it blocks SIGUSR2 and SIGRTMIN and queues
 * SIGUSR2 to its thread (raise) and SIGRTMIN twice to the process (sigqueue,
 * values 1 and 2); it prints "ready PID", waits in pause() for 40 alarms,
 * sends itself SIGUSR1, unblocks the queued signals and prints what it sees.
 * A resume that lost the SIGALRM handler dies of SIGALRM; one that lost the
 * timer waits forever; one that lost the queued signals or their siginfo
 * prints other counts.  Exit 0. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

static volatile sig_atomic_t alarms, usr1, usr2, rt;

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

static void on_usr2(int sig)
{
	(void)sig;
	usr2++;
}

static void on_rt(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)uc;
	rt += si->si_value.sival_int;
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
	sa.sa_handler = on_usr2;
	sigaction(SIGUSR2, &sa, NULL);
	sa.sa_sigaction = on_rt;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGRTMIN, &sa, NULL);
	sigset_t held;
	sigemptyset(&held);
	sigaddset(&held, SIGUSR2);
	sigaddset(&held, SIGRTMIN);
	sigprocmask(SIG_BLOCK, &held, NULL);
	raise(SIGUSR2);
	sigqueue(getpid(), SIGRTMIN, (union sigval){ .sival_int = 1 });
	sigqueue(getpid(), SIGRTMIN, (union sigval){ .sival_int = 2 });
	setitimer(ITIMER_REAL, &it, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (alarms < 40)
		pause();
	kill(getpid(), SIGUSR1);
	sigprocmask(SIG_UNBLOCK, &held, NULL);
	mode_t m = umask(0);
	getitimer(ITIMER_REAL, &it);
	getrlimit(RLIMIT_NOFILE, &rl);
	prctl(PR_GET_NAME, name);
	if (!getcwd(cwd, sizeof(cwd)))
		return 3;
	printf("usr1 %d usr2 %d rt %d umask %03o cwd %s name %s nofile %llu interval %ld\n", (int)usr1,
	       (int)usr2, (int)rt, (unsigned)m,
	       cwd, name, (unsigned long long)rl.rlim_cur, (long)it.it_interval.tv_usec);
	return 0;
}
