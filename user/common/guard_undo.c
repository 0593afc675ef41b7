/* The worker's undo log and the waiting process's use of it: see guard.h. */
#include "common/guard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#define UNDO_MAX 2000

struct undo {
	int pid;                /* 0: nothing to undo */
	unsigned long long start; /* its start time (/proc/PID/stat field 22) */
	unsigned n;             /* entries complete */
	bool partial;           /* more than UNDO_MAX: not every one is here */
	struct {
		uint64_t addr;
		uint8_t len;
		uint8_t bytes[GB_GUARD_UNDO_LEN];
	} v[UNDO_MAX];
};

static struct undo *undo; /* shared by the waiting process and its worker */

void gb_guard__undo_init(void)
{
	void *m = mmap(NULL, sizeof(*undo), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	undo = m == MAP_FAILED ? NULL : m;
}

/* The fields after "(comm)" of the stat file at path (the state first),
 * in buf: NULL when it cannot be read, "" when it has no such fields. */
static const char *stat_fields(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, size - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = 0;
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p + 2 : "";
}

static unsigned long long start_time(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	const char *p = stat_fields(path, buf, sizeof(buf));
	/* state is field 3, start time field 22 */
	for (int f = 3; p && f < 22; f++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	return p ? strtoull(p, NULL, 10) : 0;
}

void gb_guard_undo_add(pid_t pid, uint64_t addr, const uint8_t *bytes, unsigned len)
{
	if (!undo || len > GB_GUARD_UNDO_LEN)
		return;
	if (undo->pid != pid) {
		undo->n = 0;
		undo->partial = false;
		undo->start = start_time(pid);
		__atomic_store_n(&undo->pid, pid, __ATOMIC_RELEASE);
	}
	if (undo->n >= UNDO_MAX) {
		undo->partial = true;
		return;
	}
	unsigned k = undo->n;
	undo->v[k].addr = addr;
	undo->v[k].len = (uint8_t)len;
	memcpy(undo->v[k].bytes, bytes, len);
	__atomic_store_n(&undo->n, k + 1, __ATOMIC_RELEASE); /* complete before it counts */
}

void gb_guard_undo_clear(void)
{
	if (undo)
		__atomic_store_n(&undo->pid, 0, __ATOMIC_RELEASE);
}

/* Thread tid seized and stopped (PTRACE_INTERRUPT): the signal it was
 * stopped to take (to give back at the detach), 0, -2 (it exited), or -1
 * (not held). */
static int hold(pid_t tid)
{
	int st;
	if (ptrace(PTRACE_SEIZE, tid, 0, 0))
		return errno == ESRCH ? -2 : -1;
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0))
		return -2; /* (seized: only its end stops that) */
	for (;;) {
		if (waitpid(tid, &st, __WALL) < 0) {
			if (errno == EINTR)
				continue;
			return -2;
		}
		if (!WIFSTOPPED(st))
			return -2;
		if (st >> 16) /* an event stop (the interrupt, a group-stop) */
			return 0;
		return WSTOPSIG(st); /* a signal-delivery-stop: it goes back */
	}
}

/* Has thread tid of pid ended (no such task, or a zombie)? */
static bool exited(pid_t pid, pid_t tid)
{
	char path[96], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	const char *p = stat_fields(path, buf, sizeof(buf));
	return !p || *p == 'Z' || *p == 'X';
}

/* Every thread of pid held (new ones too, until none appears), the bytes
 * written back, every thread let go as it was. */
void gb_guard__undo_run(void)
{
	static pid_t held[4096];
	static int sig[4096];
	size_t n = 0;
	bool denied = false;
	if (!undo || !__atomic_load_n(&undo->pid, __ATOMIC_ACQUIRE))
		return;
	pid_t pid = undo->pid;
	if (start_time(pid) != undo->start)
		return; /* gone (or another process with its pid) */
	char path[64];
	for (bool more = true; more && n < 4096;) {
		more = false;
		snprintf(path, sizeof(path), "/proc/%d/task", pid);
		DIR *d = opendir(path);
		if (!d)
			break;
		struct dirent *de;
		while ((de = readdir(d)) && n < 4096) {
			pid_t tid = atoi(de->d_name);
			bool known = false;
			for (size_t k = 0; k < n && !known; k++)
				known = held[k] == tid;
			if (tid <= 0 || known)
				continue;
			int s = hold(tid);
			/* (a thread of a program making threads all the time
			 * may be on its way out: a zombie, or not yet) */
			for (int t = 0; s == -1 && t < 100 && !exited(pid, tid); t++) {
				usleep(1000);
				s = hold(tid);
			}
			if (s == -1 && !exited(pid, tid))
				denied = true; /* alive and not held: nothing is written */
			if (s >= 0) {
				held[n] = tid;
				sig[n++] = s;
				more = true;
			}
		}
		closedir(d);
	}
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	int fd = denied ? -1 : open(path, O_RDWR | O_CLOEXEC);
	unsigned bad = 0, cnt = __atomic_load_n(&undo->n, __ATOMIC_ACQUIRE);
	for (unsigned k = cnt; fd >= 0 && k-- > 0;) /* (the last written first) */
		if (pwrite(fd, undo->v[k].bytes, undo->v[k].len, (off_t)undo->v[k].addr) !=
		    (ssize_t)undo->v[k].len)
			bad++;
	if (fd >= 0)
		close(fd);
	for (size_t k = 0; k < n; k++)
		ptrace(PTRACE_DETACH, held[k], 0, sig[k]);
	fprintf(stderr, "gebpf: pid %d: the tracing process was killed: %u of %u patched places "
		"written back%s\n", pid, fd < 0 ? 0 : cnt - bad, cnt,
		undo->partial ? " (not all were logged)" : "");
	undo->pid = 0;
}
