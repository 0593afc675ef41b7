/* The copy-on-write copy of a stopped process (cow.h). */
#include "snap/cow.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "ptrace/inject.h"
#include "ptrace/tracee.h"
#include "snap/proc.h"

int gb_snap_cow_fork(struct gb_tracee *t, pid_t *child, char *why, size_t whylen)
{
	struct gb_thread *th = NULL;
	struct gb_proc_status st;
	*child = 0;
	for (size_t i = 0; i < t->nthreads && !th; i++)
		if (!t->threads[i].exited && t->threads[i].stopped)
			th = &t->threads[i];
	if (!th) {
		snprintf(why, whylen, "no stopped thread");
		return -ESRCH;
	}
	int r = gb_proc_status(t->pid, th->tid, &st);
	if (r) {
		snprintf(why, whylen, "%s", strerror(-r));
		return r;
	}
	/* A filter could answer clone with a kill: do not try. */
	if (st.seccomp == 2) {
		snprintf(why, whylen, "it runs under a seccomp filter");
		return -EPERM;
	}
	uint64_t insn = gb_inject_find_syscall(t->pid, 0, 0);
	if (!insn) {
		snprintf(why, whylen, "no syscall instruction found in its code");
		return -ENOENT;
	}
	const uint64_t args[6] = { CLONE_PARENT, 0, 0, 0, 0, 0 }; /* exit signal 0 */
	long ret = 0;
	unsigned long msg = 0;
	r = gb_inject_syscall_ev(th->tid, insn, SYS_clone, args, &ret, &th->pending_sig, &msg);
	if (r) {
		snprintf(why, whylen, "injecting clone: %s", strerror(-r));
		return r;
	}
	if (ret < 0) {
		snprintf(why, whylen, "clone: %s", strerror((int)-ret));
		return (int)ret;
	}
	pid_t c = (pid_t)msg;
	if (c <= 0) {
		snprintf(why, whylen, "the clone was not reported to the tracer");
		return -EPROTO;
	}
	int status;
	while (waitpid(c, &status, __WALL) < 0)
		if (errno != EINTR) {
			snprintf(why, whylen, "waiting for the copy: %s", strerror(errno));
			return -errno;
		}
	if (!WIFSTOPPED(status)) {
		snprintf(why, whylen, "the copy ended at once");
		return -ESRCH;
	}
	if (ptrace(PTRACE_SETOPTIONS, c, 0, PTRACE_O_EXITKILL)) {
		int e = errno;
		kill(c, SIGKILL);
		waitpid(c, &status, __WALL);
		snprintf(why, whylen, "PTRACE_SETOPTIONS on the copy: %s", strerror(e));
		return -e;
	}
	*child = c;
	return 0;
}

int gb_snap_cow_freeze_maps(pid_t pid, const struct gb_snapshot *s, bool *freeze)
{
	char path[64], line[1024];
	int n = 0;
	for (size_t i = 0; i < s->nmaps; i++) {
		freeze[i] = s->maps[i].perms[3] == 's' && s->maps[i].live;
		n += freeze[i];
	}
	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	size_t cur = SIZE_MAX, next = 0;
	while (fgets(line, sizeof(line), f)) {
		uint64_t start, end;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " ", &start, &end) == 2) {
			cur = SIZE_MAX;
			while (next < s->nmaps && s->maps[next].start < start)
				next++;
			if (next < s->nmaps && s->maps[next].start == start)
				cur = next;
			continue;
		}
		if (cur == SIZE_MAX || strncmp(line, "VmFlags:", 8))
			continue;
		bool dc = strstr(line, " dc") != NULL, wf = strstr(line, " wf") != NULL;
		if ((dc || wf) && s->maps[cur].live && !freeze[cur]) {
			freeze[cur] = true;
			n++;
		}
	}
	fclose(f);
	return n;
}
