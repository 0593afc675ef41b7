#include "common/sigflag.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t stop_signo;

static void on_signal(int sig) { stop_signo = sig; }

void gb_sigflag_install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0; /* no SA_RESTART: interrupt waits */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN); /* write errors come back as EPIPE instead */
}

bool gb_sigflag_stop(void) { return stop_signo != 0; }
int gb_sigflag_signo(void) { return stop_signo; }
