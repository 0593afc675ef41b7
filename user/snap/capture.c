/* Capture: a stopped gb_tracee -> struct gb_snapshot.
 *
 * Registers (general, FXSAVE, XSAVE), the stop's siginfo, signal masks per
 * thread; the maps; exe, auxv, fds, psinfo; then stack traces unwound from
 * the snapshot itself (stack.c).
 *
 * Memory is not read here: the maps are classified (bytes or none, sparse or
 * not) and a source (source.h) remembers where the bytes are, the stopped
 * process or, with the fork option, its copy-on-write copy (cow.h);
 * gb_snapshot_save copies them through one fixed buffer.  With the copy, the
 * maps the copy does not hold as they are (MAP_SHARED, MADV_DONTFORK,
 * MADV_WIPEONFORK) are copied to a scratch file before this returns, and the
 * stacks are unwound later, from the copy.  A map that cannot be read
 * ([vvar], PROT_NONE) is kept with no bytes.
 */
#include "snap/snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "common/log.h"
#include "decode/xsave.h"
#include "ptrace/maps.h"
#include "ptrace/regs.h"
#include "ptrace/tracee.h"
#include "snap/cow.h"
#include "snap/proc.h"
#include "snap/source.h"

static bool is_plain_anon(const struct gb_map *pm)
{
	return pm->inode == 0 && (pm->path[0] == 0 || !strcmp(pm->path, "[heap]") ||
				  !strncmp(pm->path, "[stack", 6) || !strncmp(pm->path, "[anon:", 6));
}

/* Whether the map has bytes to read (decided for good when they are read:
 * a map of which no page can be read is then kept with none). */
static void classify_map(const struct gb_map *pm, struct gb_snap_map *m)
{
	m->live = (pm->prot & PROT_READ) && strcmp(pm->path, "[vvar]") && strcmp(pm->path, "[vvar_vclock]");
	m->sparse = is_plain_anon(pm);
}

/* Give the memory a copy-on-write copy; copy what the copy does not hold
 * as it is now.  0 (o->forked says whether it happened) or -errno. */
static int fork_copy(struct gb_tracee *tr, struct gb_snapshot *s, struct gb_snap_capture_opts *o)
{
	pid_t child = 0;
	uint8_t *buf = NULL;
	bool *freeze = calloc(s->nmaps ? s->nmaps : 1, sizeof(*freeze));
	if (!freeze)
		return gb_fail(-ENOMEM, "pid %d: out of memory", tr->pid);
	int r = gb_snap_cow_freeze_maps(tr->pid, s, o->plan, freeze);
	if (r < 0)
		gb_snap_cow_none(tr->pid, r, "smaps: %s", strerror(-r));
	else
		r = gb_snap_cow_fork(tr, &child);
	if (r >= 0 && (r = gb_snap_cow_missing_maps(child, s, freeze)) < 0)
		gb_snap_cow_none(tr->pid, r, "the copy's maps: %s", strerror(-r));
	if (r < 0) {
		/* Said: an error when the process is gone, else a warning
		 * (the capture goes on with the process stopped). */
		if (r == -ESRCH)
			gb_err("pid %d: the process exited during the capture", tr->pid);
		else
			r = 0;
		goto cleanup;
	}
	r = 0;
	buf = malloc(GB_SNAP_SRC_CHUNK);
	if (!buf) {
		r = gb_fail(-ENOMEM, "pid %d: out of memory", tr->pid);
		goto cleanup;
	}
	for (size_t i = 0; i < s->nmaps && !r; i++) {
		struct gb_snap_map *m = &s->maps[i];
		if (freeze[i] && (r = gb_snap_src__spill(s->src, m, o->scratch_dir, buf, GB_SNAP_SRC_CHUNK)))
			r = gb_fail(r, "pid %d: copying 0x%" PRIx64 "-0x%" PRIx64 " to %s: %s",
				 tr->pid, m->start, m->end, o->scratch_dir ? o->scratch_dir : ".",
				 r == -ESRCH ? "the process exited during the capture" : strerror(-r));
	}
	if (!r)
		r = gb_snap_src__set_child(s->src, child);
	if (!r) {
		o->forked = true;
		child = 0;
	}
cleanup:
	if (child > 0) {
		int st;
		kill(child, SIGKILL);
		waitpid(child, &st, __WALL);
	}
	free(buf);
	free(freeze);
	return r;
}

static int capture_thread(pid_t host_pid, const struct gb_thread *th, struct gb_snap_thread *t)
{
	struct gb_proc_status st;
	int r = gb_proc_status(host_pid, th->tid, &st);
	if (r)
		return r;
	t->tid = st.nspid;
	t->sigpend = st.sigpnd | st.shdpnd;
	t->sighold = st.sigblk;
	if ((r = gb_regs_get(th->tid, &t->regs)) || (r = gb_fpregs_get(th->tid, &t->fpregs)))
		return r;
	/* The XSAVE area in the standard layout that gdb and kernel cores on
	 * common hardware use (decode/xsave.h). */
	size_t cap = 0, len;
	t->xstate = NULL;
	if (gb_xstate_read(th->tid, &t->xstate, &cap, &len) == 0) {
		t->xstate_len = len;
		size_t slen;
		uint8_t *std = gb_xsave_to_standard(t->xstate, len, &slen);
		if (std) {
			free(t->xstate);
			t->xstate = std;
			t->xstate_len = slen;
		}
	} else {
		free(t->xstate);
		t->xstate = NULL;
	}
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	if (ptrace(PTRACE_GETSIGINFO, th->tid, 0, &si) == 0) {
		memcpy(t->siginfo, &si, sizeof(t->siginfo));
		t->cursig = si.si_signo;
	}
	return 0;
}

int gb_snapshot_capture(struct gb_tracee *tr, const struct gb_snap_point *pt,
			struct gb_snapshot **out)
{
	return gb_snapshot_capture_opts(tr, pt, NULL, out);
}

int gb_snapshot_capture_opts(struct gb_tracee *tr, const struct gb_snap_point *pt,
			     struct gb_snap_capture_opts *o, struct gb_snapshot **out)
{
	struct gb_maps maps = { 0 };
	struct utsname u;
	int r;
	if (o)
		o->forked = false;
	*out = NULL;
	struct gb_snapshot *s = gb_snapshot_alloc();
	if (!s)
		return gb_fail(-ENOMEM, "pid %d: out of memory", tr->pid);
	s->owns_map_data = true;
	s->meta.arch = strdup("amd64");
	s->meta.platform = strdup("linux");
	s->meta.kernel = strdup(uname(&u) == 0 ? u.release : "");
	s->meta.point = strdup(pt && pt->point ? pt->point : "attach");
	s->meta.vt = pt ? pt->vt : -1;

	s->threads = calloc(tr->nthreads ? tr->nthreads : 1, sizeof(*s->threads));
	if (!s->threads) {
		r = gb_fail(-ENOMEM, "pid %d: out of memory", tr->pid);
		goto cleanup;
	}
	for (size_t i = 0; i < tr->nthreads; i++) {
		const struct gb_thread *th = &tr->threads[i];
		if (th->exited)
			continue;
		if (!th->stopped) {
			r = gb_fail(-EINVAL, "pid %d: thread %d is not stopped", tr->pid, th->tid);
			goto cleanup;
		}
		struct gb_snap_thread *t = &s->threads[s->nthreads++];
		r = capture_thread(tr->pid, th, t);
		if (r) {
			r = gb_fail(r, "pid %d: thread %d: %s", tr->pid, th->tid,
				 r == -ESRCH ? "exited during the capture" : strerror(-r));
			goto cleanup;
		}
		if (pt && pt->tid == th->tid)
			s->meta.tid = t->tid;
	}
	if (!s->nthreads) {
		r = gb_fail(-ESRCH, "pid %d: no live thread to capture", tr->pid);
		goto cleanup;
	}

	r = gb_proc_fill(tr->pid, s);
	if (!r)
		r = gb_maps_read(tr->pid, &maps);
	if (r) {
		r = gb_fail(r, "pid %d: %s", tr->pid,
			 r == -ESRCH ? "the process exited during the capture" : strerror(-r));
		goto cleanup;
	}
	s->maps = calloc(maps.n ? maps.n : 1, sizeof(*s->maps));
	if (!s->maps) {
		r = gb_fail(-ENOMEM, "pid %d: out of memory", tr->pid);
		goto cleanup;
	}
	for (size_t i = 0; i < maps.n; i++) {
		const struct gb_map *pm = &maps.v[i];
		struct gb_snap_map *m = &s->maps[s->nmaps++];
		m->start = pm->start;
		m->end = pm->end;
		m->pgoff = pm->offset;
		m->inode = pm->inode;
		memcpy(m->perms, pm->perms, sizeof(m->perms));
		m->path = strdup(pm->path);
		if (!m->path) {
			r = gb_fail(-ENOMEM, "pid %d: out of memory", tr->pid);
			goto cleanup;
		}
		classify_map(pm, m);
	}
	s->src = gb_snap_src__new(tr->pid);
	if (!s->src) {
		r = gb_fail(-ENOMEM, "pid %d: out of memory", tr->pid);
		goto cleanup;
	}
	if (o && o->fork && (r = fork_copy(tr, s, o)))
		goto cleanup;
	/* Unwinding reads memory: from the copy once the target runs again. */
	if (!o || !o->forked)
		gb_snapshot_unwind(s);
	*out = s;
	s = NULL;
	r = 0;
cleanup:
	gb_maps_free(&maps);
	gb_snapshot_free(s);
	return r;
}
