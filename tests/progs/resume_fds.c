/* A program for gebpf resume tests of the fds that are kernel objects
 * (docs/resume.md "Files"): before resume_here() (where `gebpf snap --at
 * resume_here` stops) it makes
 *   an eventfd (non-blocking) with count 5,
 *   a pipe holding "hello" (its read end non-blocking, without O_CLOEXEC),
 *   a timerfd armed for 30 s, then every 1 s,
 *   a signalfd for SIGUSR1 (blocked),
 *   an epoll watching the eventfd (data 0x1111), the pipe's read end
 *   (edge-triggered, data 0x2222) and the timerfd (data 0x3333),
 *   an inotify instance watching /tmp (wd 1: IN_CREATE) and / (wd 2),
 *   a memfd "gbm" holding "memdata" (its offset 7), sealed against growing
 *   and shrinking,
 * and after it checks each from inside, through the same fd numbers, and
 * prints one line per object; the same lines whether it ran through or was
 * snapped, killed and resumed.  Exit status 0. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

__attribute__((noinline)) int resume_here(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

static int cloexec(int fd)
{
	return (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
}

static int nonblock(int fd)
{
	return (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0;
}

int main(void)
{
	int efd = eventfd(5, EFD_NONBLOCK | EFD_CLOEXEC), p[2];
	if (efd < 0 || pipe(p) || write(p[1], "hello", 5) != 5 ||
	    fcntl(p[0], F_SETFL, O_NONBLOCK))
		return 1;
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	struct itimerspec its = { { 1, 0 }, { 30, 0 } };
	if (tfd < 0 || timerfd_settime(tfd, 0, &its, NULL))
		return 2;
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, SIGUSR1);
	int sfd = sigprocmask(SIG_BLOCK, &m, NULL) ? -1 : signalfd(-1, &m, SFD_CLOEXEC);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event e1 = { EPOLLIN, { .u64 = 0x1111 } }, e2 = { EPOLLIN | EPOLLET, { .u64 = 0x2222 } },
			   e3 = { EPOLLIN, { .u64 = 0x3333 } };
	if (sfd < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, efd, &e1) ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &e2) || epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &e3))
		return 3;
	int in = inotify_init1(IN_NONBLOCK);
	if (in < 0 || inotify_add_watch(in, "/tmp", IN_CREATE) != 1 ||
	    inotify_add_watch(in, "/", IN_DELETE_SELF) != 2)
		return 4;
	int mfd = memfd_create("gbm", MFD_ALLOW_SEALING);
	if (mfd < 0 || write(mfd, "memdata", 7) != 7 || fcntl(mfd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK))
		return 5;

	resume_here(efd);

	struct epoll_event ev[8];
	int n = epoll_wait(ep, ev, 8, 0);
	uint64_t data = 0;
	for (int i = 0; i < n; i++)
		data |= ev[i].data.u64 << (16 * (ev[i].data.u64 == 0x2222));
	printf("epoll %d ready %#llx\n", n, (unsigned long long)data);
	uint64_t cnt = 0;
	ssize_t got = read(efd, &cnt, 8);
	printf("eventfd %zd %llu nonblock %d\n", got, (unsigned long long)cnt, nonblock(efd));
	char buf[16] = { 0 };
	got = read(p[0], buf, sizeof(buf) - 1);
	printf("pipe %zd %s nonblock %d %d\n", got, buf, nonblock(p[0]), nonblock(p[1]));
	struct itimerspec now;
	timerfd_gettime(tfd, &now);
	printf("timerfd armed %d interval %ld\n", now.it_value.tv_sec > 0 && now.it_value.tv_sec <= 30,
	       (long)now.it_interval.tv_sec);
	raise(SIGUSR1);
	struct signalfd_siginfo si = { 0 };
	got = read(sfd, &si, sizeof(si));
	printf("signalfd %zd %u\n", got, si.ssi_signo);
	printf("cloexec %d %d %d %d %d %d\n", cloexec(efd), cloexec(p[0]), cloexec(p[1]), cloexec(tfd),
	       cloexec(sfd), cloexec(ep));
	char name[64];
	snprintf(name, sizeof(name), "/tmp/resume_fds.%d", (int)getpid());
	int made = open(name, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	unlink(name);
	close(made);
	char evs[4096] __attribute__((aligned(8)));
	int found = 0;
	ssize_t n2 = read(in, evs, sizeof(evs));
	for (char *q = evs; n2 > 0 && q < evs + n2;) {
		struct inotify_event *ie = (struct inotify_event *)q;
		found |= ie->wd == 1 && (ie->mask & IN_CREATE) && ie->len && !strcmp(ie->name, name + 5);
		q += sizeof(*ie) + ie->len;
	}
	printf("inotify create seen %d nonblock %d\n", found, nonblock(in));
	char mb[8] = { 0 };
	printf("memfd %s at %ld seals %#x grow %d\n", pread(mfd, mb, 7, 0) == 7 ? mb : "?",
	       (long)lseek(mfd, 0, SEEK_CUR), fcntl(mfd, F_GET_SEALS), ftruncate(mfd, 100));
	return 0;
}
