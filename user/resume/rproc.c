/* The process-wide kernel state of the new process (docs/resume.md, "What
 * is restored"): umask and working directory (CRIU: restore_fs), signal
 * dispositions (prepare_sigactions), interval timers (restore_itimers),
 * resource limits (restore_rlims, last), each from the snapshot's
 * "process" note; a part the snapshot lacks stays gebpf's caller's (umask,
 * cwd, limits) or the default (dispositions, timers). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>

#include "common/log.h"
#include "resume/resume_int.h"

int gb_resume__proc(struct gb_rctx *c, const struct gb_snapshot *s)
{
	const struct gb_snap_pstate *pk = &s->pk;
	long r;
	if (pk->have & GB_PS_UMASK)
		gb_rsys(c, SYS_umask, pk->umask, 0, 0, 0, 0, 0);
	if ((pk->have & GB_PS_CWD) && pk->cwd) {
		uint64_t a = gb_rput(c, 0, pk->cwd, strlen(pk->cwd) + 1);
		r = a ? gb_rsys(c, SYS_chdir, a, 0, 0, 0, 0, 0) : -ENAMETOOLONG;
		if (r < 0)
			gb_warn("resume: working directory %s: %s; the new process has gebpf's", pk->cwd,
				strerror((int)-r));
	}
	if (!(pk->have & GB_PS_SIGACTS))
		return 0;
	for (int sig = 1; sig <= GB_SNAP_NSIG; sig++) {
		const struct gb_snap_sigact *sa = &pk->sigact[sig - 1];
		if (sig == SIGKILL || sig == SIGSTOP || (!sa->handler && !sa->flags && !sa->mask))
			continue;
		uint64_t a = gb_rput(c, 0, sa, sizeof(*sa));
		r = a ? gb_rsys(c, SYS_rt_sigaction, (uint64_t)sig, a, 0, 8, 0, 0) : -EFAULT;
		if (r < 0)
			return gb_resume__fail(c, (int)r, "rt_sigaction SIG%s (handler 0x%" PRIx64 "): %s",
					       sigabbrev_np(sig) ?: "?", sa->handler, strerror((int)-r));
	}
	return 0;
}

int gb_resume__timers(struct gb_rctx *c, const struct gb_snapshot *s)
{
	const struct gb_snap_pstate *pk = &s->pk;
	if (!(pk->have & GB_PS_ITIMERS))
		return 0;
	for (int w = 0; w < 3; w++) {
		struct gb_snap_itimer it = pk->itimer[w];
		/* An interval timer caught between its expiry and the dequeue of
		 * its signal reads "value 0, interval N": the kernel re-arms
		 * ITIMER_REAL only when the SIGALRM it sent is dequeued (that
		 * signal is among the pending ones restored).  Skipped as if
		 * disarmed, the resumed process got that alarm and no other
		 * (a program waiting in pause() for the next: for ever).  Armed
		 * one interval on, as the dequeue would. */
		if (!it.val_sec && !it.val_usec && (it.int_sec || it.int_usec)) {
			it.val_sec = it.int_sec;
			it.val_usec = it.int_usec;
		}
		if (!it.val_sec && !it.val_usec)
			continue;
		uint64_t a = gb_rput(c, 0, &it, sizeof(it));
		long r = a ? gb_rsys(c, SYS_setitimer, (uint64_t)w, a, 0, 0, 0, 0) : -EFAULT;
		if (r < 0)
			return gb_resume__fail(c, (int)r, "setitimer %d: %s", w, strerror((int)-r));
	}
	return 0;
}

/* Append "what" to the list of things not restored. */
static void add(char *buf, size_t len, const char *what)
{
	size_t n = strlen(buf);
	snprintf(buf + n, len - n, "%s%s", n ? "; " : "", what);
}

void gb_resume__limits(struct gb_rctx *c, const struct gb_snapshot *s)
{
	const struct gb_snap_pstate *pk = &s->pk;
	char lost[512] = "", what[160];
	if (pk->have & GB_PS_RLIMITS)
		for (int r = 0; r < GB_SNAP_NRLIMITS; r++) {
			struct rlimit rl = { pk->rlim[r].cur, pk->rlim[r].max };
			if (prlimit(c->pid, (__rlimit_resource_t)r, &rl, NULL)) {
				snprintf(what, sizeof(what), "resource limit %d (%s)", r, strerror(errno));
				add(lost, sizeof(lost), what);
			}
		}
	if (pk->posix_timers) {
		snprintf(what, sizeof(what), "%u POSIX timer%s (timer_create)", pk->posix_timers,
			 pk->posix_timers == 1 ? "" : "s");
		add(lost, sizeof(lost), what);
	}
	if (pk->children) {
		snprintf(what, sizeof(what), "%u child process%s (and any ptrace relation to them)",
			 pk->children, pk->children == 1 ? "" : "es");
		add(lost, sizeof(lost), what);
	}
	uint64_t pend = 0; /* signals known only by their mask (older snapshots) */
	uint32_t dropped = s->pk.pending.lost;
	size_t no_tid = 0;
	for (size_t i = 0; i < s->nthreads; i++) {
		const struct gb_snap_thread *th = &s->threads[i];
		if (th->ks.have & GB_TS_PENDING)
			dropped += th->ks.pending.lost;
		else
			pend |= th->sigpend;
		no_tid += s->nthreads > 1 && !(th->ks.have & GB_TS_TID_ADDR);
	}
	if (pend) {
		size_t n = (size_t)snprintf(what, sizeof(what), "pending signals");
		for (int sig = 1; sig <= 64 && n < sizeof(what) - 16; sig++)
			if (pend & (1ull << (sig - 1)))
				n += (size_t)snprintf(what + n, sizeof(what) - n, " SIG%s",
						      sigabbrev_np(sig) ?: "RT");
		add(lost, sizeof(lost), what);
	}
	if (dropped) {
		snprintf(what, sizeof(what), "%u queued signal%s past the %d kept per queue", dropped,
			 dropped == 1 ? "" : "s", GB_SNAP_NPEND);
		add(lost, sizeof(lost), what);
	}
	if (no_tid) {
		snprintf(what, sizeof(what), "clear_child_tid of %zu thread%s (not in the snapshot: "
			 "pthread_join of it waits forever)", no_tid, no_tid == 1 ? "" : "s");
		add(lost, sizeof(lost), what);
	}
	if (!(pk->have & GB_PS_SIGACTS))
		add(lost, sizeof(lost), "signal handlers (not in the snapshot)");
	if (lost[0])
		gb_warn("resume: not restored: %s", lost);
}
