/* The copy-on-write copy of a stopped process (cow.h). */
#include "snap/cow.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include "common/bound.h"
#include "common/grow.h"
#include "common/log.h"
#include "ptrace/inject.h"
#include "ptrace/clonestub.h"
#include "ptrace/maps.h"
#include "ptrace/tracee.h"
#include "snap/proc.h"

int gb_snap_cow_none(pid_t pid, int e, const char *fmt, ...)
{
	char why[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (e != -ESRCH)
		gb_warn("snap: pid %d: no copy-on-write copy (%s): capturing with the process stopped",
			pid, why);
	return e;
}

int gb_snap_cow_fork(struct gb_tracee *t, pid_t *child)
{
	struct gb_thread *th = NULL;
	struct gb_proc_status st;
	*child = 0;
	for (size_t i = 0; i < t->nthreads && !th; i++)
		if (!t->threads[i].exited && t->threads[i].stopped)
			th = &t->threads[i];
	if (!th) {
		return gb_snap_cow_none(t->pid, -ESRCH, "no stopped thread");
	}
	int r = gb_proc_status(t->pid, th->tid, &st);
	if (r) {
		return gb_snap_cow_none(t->pid, r, "%s", strerror(-r));
	}
	/* A filter could answer clone with a kill, and strict mode kills on
	 * the stub's rt_sigprocmask: do not try. */
	if (st.seccomp) {
		return gb_snap_cow_none(t->pid, -EPERM, st.seccomp == 1 ? "it runs in seccomp strict mode"
							       : "it runs under a seccomp filter");
	}
	uint64_t insn = gb_inject_find_syscall(t->pid, 0, 0);
	if (!insn) {
		return gb_snap_cow_none(t->pid, -ENOENT, "no syscall instruction found in its code");
	}
	long ret = 0;
	pid_t c = 0;
	r = gb_snap_clone_stub(t->pid, th->tid, insn, &ret, &c, &th->pending_sig);
	if (r == -EINTR) {
		/* It finishes the stub on its own once detached. */
		th->stopped = false;
		return gb_fail(-EINTR, "pid %d: interrupted while making the copy", t->pid);
	}
	if (r) {
		return gb_snap_cow_none(t->pid, r, "running the clone: %s", strerror(-r));
	}
	if (ret < 0) {
		return gb_snap_cow_none(t->pid, (int)ret, "clone: %s", strerror((int)-ret));
	}
	if (c <= 0) {
		return gb_snap_cow_none(t->pid, -EPROTO, "the clone was not reported to the tracer");
	}
	/* Its first stop, before its first instruction (which would be the
	 * stub's exit_group: it is never let run). */
	int status;
	while (waitpid(c, &status, __WALL) < 0)
		if (errno != EINTR) {
			return gb_snap_cow_none(t->pid, -errno, "waiting for the copy: %s", strerror(errno));
		}
	if (!WIFSTOPPED(status)) {
		return gb_snap_cow_none(t->pid, -ESRCH, "the copy ended at once");
	}
	if (ptrace(PTRACE_SETOPTIONS, c, 0, PTRACE_O_EXITKILL)) {
		int e = errno;
		kill(c, SIGKILL);
		waitpid(c, &status, __WALL);
		return gb_snap_cow_none(t->pid, -e, "PTRACE_SETOPTIONS on the copy: %s", strerror(e));
	}
	*child = c;
	return 0;
}

struct vma_flags {
	uint64_t start, end;
	bool dc, wf;
	bool mw;        /* VM_MAYWRITE: the process can make it writable */
};

struct gb_snap_cow_plan {
	struct vma_flags *v;
	size_t n;
};

void gb_snap_cow_plan__free(struct gb_snap_cow_plan *p)
{
	if (p)
		free(p->v);
	free(p);
}

struct gb_snap_cow_plan *gb_snap_cow_plan__read(pid_t pid)
{
	char path[64], line[1024];
	size_t cap = 0;
	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	FILE *f = fopen(path, "re");
	struct gb_snap_cow_plan *p = calloc(1, sizeof(*p));
	if (!f || !p)
		goto fail;
	while (fgets(line, sizeof(line), f)) {
		uint64_t start, end;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " ", &start, &end) == 2) {
			if (GB_GROW(&p->v, &cap, p->n + 1))
				goto fail;
			p->v[p->n++] = (struct vma_flags){ start, end, false, false, true };
		} else if (p->n && !strncmp(line, "VmFlags:", 8)) {
			p->v[p->n - 1].dc = strstr(line, " dc") != NULL;
			p->v[p->n - 1].wf = strstr(line, " wf") != NULL;
			p->v[p->n - 1].mw = strstr(line, " mw") != NULL;
		}
	}
	fclose(f);
	return p;
fail:
	if (f)
		fclose(f);
	gb_snap_cow_plan__free(p);
	return NULL;
}

/* The VMA that started at start when plan was read (its end may have moved:
 * a heap grows). */
static const struct vma_flags *plan_find(const struct gb_snap_cow_plan *p, uint64_t start)
{
	size_t lo = GB_LOWER(p->v, p->n, start, start);
	return lo < p->n && p->v[lo].start == start ? &p->v[lo] : NULL;
}

int gb_snap_cow_freeze_maps(pid_t pid, const struct gb_snapshot *s, const struct gb_snap_cow_plan *plan,
			    bool *freeze)
{
	struct gb_snap_cow_plan *own = NULL;
	int n = 0;
	if (!plan && !(plan = own = gb_snap_cow_plan__read(pid)))
		return errno ? -errno : -ENOMEM;
	for (size_t i = 0; i < s->nmaps; i++) {
		const struct gb_snap_map *m = &s->maps[i];
		const struct vma_flags *f = plan_find(plan, m->start);
		/* The vDSO's padding holds the clone's stub while the copy is
		 * made (clonestub.h): its bytes come from the process, where
		 * they are put back at once.  A shared mapping the process can
		 * never write (a file opened read-only: no VM_MAYWRITE, smaps'
		 * "mw") changes only as its file does, which a private file
		 * page not yet touched does too: the copy reads it later
		 * (the JVM's 125 MB lib/modules took most of a 24-thread
		 * service's 130-200 ms freeze). */
		bool shared = m->perms[3] == 's' && (!f || f->mw);
		freeze[i] = m->live && (shared || (f ? f->dc || f->wf : m->sparse) ||
					!strcmp(m->path, "[vdso]"));
		n += freeze[i];
	}
	gb_snap_cow_plan__free(own);
	return n;
}

int gb_snap_cow_missing_maps(pid_t child, const struct gb_snapshot *s, bool *freeze)
{
	struct gb_maps cm;
	int r = gb_maps_read(child, &cm), n = 0;
	if (r)
		return r;
	size_t j = 0;
	for (size_t i = 0; i < s->nmaps; i++) {
		const struct gb_snap_map *m = &s->maps[i];
		while (j < cm.n && cm.v[j].start < m->start)
			j++;
		bool there = j < cm.n && cm.v[j].start == m->start && cm.v[j].end == m->end;
		if (m->live && !there && !freeze[i]) {
			freeze[i] = true;
			n++;
		}
	}
	gb_maps_free(&cm);
	return n;
}
