/* One `gebpf sample` run: session.h. */
#include "sample/session.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/sigflag.h"
#include "sample/jsonl.h"
#include "sample/flame.h"
#include "sample/pprof.h"
#include "sample/pprof_dir.h"
#include "sample/profile.h"
#include "sample/pystack.h"
#include "sample/target.h"
#include "sym/syms.h"
#include "unwind/kallsyms.h"
#include "unwind/unwind.h"

#define CGROUP2_MAGIC 0x63677270
#define MAX_FRAMES 256
#define REORDER_NS 10000000ull   /* see on_sample */
#define FORGET_NS 2000000000ull  /* see loop */
#define REFRESH_NS 250000000ull  /* maps read again (see loop) */
#define ACTIVE_NS 5000000000ull  /* ... of processes with a sample this recent */

struct session {
	const struct gb_sample_session_opts *o;
	struct gb_target *targets[GB_SAMPLE_MAX_PIDS];
	size_t ntargets;
	struct gb_sampler *smp;
	struct gb_sample_out *lines;
	struct gb_profile *prof;
	/* Continuous mode: prof holds the samples of [period_start,
	 * period_end), next those taken after period_end until prof is
	 * written (CLOCK_MONOTONIC ns, the samples' clock). */
	struct gb_pprof_dir *dir;
	struct gb_profile *next;
	uint64_t period_start, period_end, every_ns, mono0;
	int64_t wall0;             /* CLOCK_REALTIME ns at mono0 */
	uint64_t unwritten;        /* profiles that could not be written */
	struct gb_unwinder *unw;
	struct gb_kallsyms *ksyms;
	struct gb_pystacks *py;    /* Python frames (not --no-python) */
	uint64_t pcs[MAX_FRAMES];
	struct gb_profile_frame frames[MAX_FRAMES + GB_MAX_PYFRAMES];
	uint64_t unwound, truncated;
	double drain_cpu;          /* CPU seconds spent reading and unwinding */
	uint64_t drain_until;      /* a drain in the loop returns by then (0: no bound) */
	bool drain_cut;            /* the last drain returned on that bound */
	int out_fd, pprof_fd, flame_fd;
};

/* A SYMBOL range.  A launched command's executable is mapped at exec, but
 * a MODULE:SYMBOL in a shared library only once ld.so maps it: retry that
 * for up to a second while the command runs. */
static int resolve_range(const struct gb_range_spec *r, struct gb_target *t, uint64_t *start,
			 uint64_t *end)
{
	char text[600], what[620];
	double give_up = gb_mono_s() + 1.0;
	pid_t pid = gb_target__pid(t);
	bool retry = gb_target__launched(t) && r->module[0];
	struct gb_range_spec got;

	gb_range_describe(r, text, sizeof(text));
	snprintf(what, sizeof(what), "sample: --range %s", text);
	while (gb_sym_range_resolve(r, pid, &got, retry ? NULL : what)) {
		if (!retry)
			return -ENOENT;
		if (gb_target__exited(t)) {
			gb_err("%s: pid %d exited before the symbol was found", what, pid);
			return -ENOENT;
		}
		if (gb_mono_s() > give_up)
			retry = false;   /* the last try says why */
		else
			usleep(2000);
	}
	*start = got.start;
	*end = got.end;
	return 0;
}

/* The cgroup v2 id of a cgroup directory (what bpf_get_current_cgroup_id()
 * returns for its processes). */
static int cgroup_id(const char *path, uint64_t *id)
{
	struct {
		struct file_handle fh;
		uint64_t id;
	} h = { .fh.handle_bytes = sizeof(uint64_t) };
	struct statfs sf;
	int mount_id;

	if (statfs(path, &sf)) {
		gb_err("sample: --cgroup %s: %s", path, strerror(errno));
		return -errno;
	}
	if (sf.f_type != CGROUP2_MAGIC) {
		gb_err("sample: --cgroup %s: not a cgroup v2 directory (under /sys/fs/cgroup)", path);
		return -EINVAL;
	}
	if (name_to_handle_at(AT_FDCWD, path, &h.fh, &mount_id, 0)) {
		gb_err("sample: --cgroup %s: %s", path, strerror(errno));
		return -errno;
	}
	memcpy(id, h.fh.f_handle, sizeof(*id));
	return 0;
}

/* Create an output file, write-only and never through a symlink, mode 0644
 * before umask.  A regular file is reopened read-write so that the JSONL
 * writer can read back whole lines after a write error. */
static int open_output(const char *path)
{
	char self[64];
	struct stat st;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);

	if (fd < 0) {
		gb_err("sample: %s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
		int rw = open(self, O_RDWR | O_CLOEXEC);
		if (rw >= 0) {
			close(fd);
			fd = rw;
		}
	}
	return fd;
}

static struct gb_profile *new_profile(const struct session *S)
{
	const struct gb_sample_session_opts *o = S->o;
	return gb_profile__new(S->unw, S->ksyms, o->all || o->cgroup || o->npids > 1);
}

/* Write the current period's profile (ended at end_ns), free it, and start
 * the next period.  The unwinder (files, modules, symbol tables) lives on. */
static int close_period(struct session *S, uint64_t end_ns)
{
	struct gb_pprof_info info = {
		.period_ns = 1000000000ull / gb_sampler__hz(S->smp),
		.time_ns = S->wall0 + (int64_t)(S->period_start - S->mono0),
		.duration_ns = (int64_t)(end_ns - S->period_start),
		.main_pid = S->ntargets ? gb_target__pid(S->targets[0]) : 0,
	};
	int err = 0;

	/* A profile that cannot be written (a full disk) is reported and
	 * counted, and sampling goes on: the exit status says it at the end. */
	gb_profile__sources(S->prof);
	if (gb_pprof_dir__write(S->dir, S->prof, &info))
		S->unwritten++;
	/* (-v: what the agent itself holds, period after period) */
	long pages = 0;
	FILE *statm = fopen("/proc/self/statm", "re");
	if (statm && fscanf(statm, "%*s %ld", &pages) != 1)
		pages = 0;
	if (statm)
		fclose(statm);
	gb_info("sample: gebpf's resident size %.1f MiB, %zu processes known to its unwinder",
		(double)pages * (double)sysconf(_SC_PAGESIZE) / 1048576.0,
		S->unw ? gb_unwinder__nprocs(S->unw) : (size_t)0);
	gb_profile__free(S->prof);
	S->prof = S->next;
	S->next = new_profile(S);
	if (!S->next) {
		gb_err("sample: %s", strerror(ENOMEM));
		err = -ENOMEM;
	}
	S->period_start = S->period_end;
	S->period_end += S->every_ns;
	return err;
}

static int on_sample(void *ctx, const struct gb_sample *s)
{
	struct session *S = ctx;
	const struct gb_sample_session_opts *o = S->o;
	const uint64_t *u = &s->pc;
	size_t nu = 1;

	if (S->lines) {
		gb_sample_out__sample(S->lines, s);
		if (o->mode == GB_SAMPLE_LINES)
			return 0; /* (else the profile too: -o with --pprof alone) */
	}
	gb_unwinder__sample_time(S->unw, s->pid, s->ns);
	if (o->stacks == GB_STACK_DWARF) {
		bool complete = false;
		if (s->regs) {
			nu = (size_t)gb_unwinder__unwind(S->unw, s->pid, s->tid, s->regs, s->stack,
							 s->stack_len, S->pcs, MAX_FRAMES, &complete);
			u = S->pcs;
		}
		if (complete)
			S->unwound++;
		else
			S->truncated++;
	} else if (o->stacks == GB_STACK_FP && s->nuser) {
		u = s->ustack;
		nu = s->nuser;
	}
	struct gb_profile *prof = S->prof;
	if (S->dir && s->ns >= S->period_end) {
		int err;
		/* The ring buffer holds samples in the order they were written,
		 * which is their time order but for CPUs writing at the same
		 * instant (microseconds apart): a sample taken 10 ms after the
		 * period's end means every sample of that period has been read.
		 * (This closes periods while a drain that never finds the ring
		 * empty goes on.) */
		while (s->ns >= S->period_end + REORDER_NS)
			if ((err = close_period(S, S->period_end)))
				return err;
		prof = s->ns >= S->period_end ? S->next : S->prof;
	}
	int err;
	if (S->py) {
		size_t n = gb_pystacks__merge(S->py, s, u, nu, S->frames,
					      sizeof(S->frames) / sizeof(S->frames[0]));
		err = gb_profile__add_frames(prof, s->pid, s->comm, s->kstack, s->nkernel, S->frames, n);
	} else {
		err = gb_profile__add(prof, s->pid, s->comm, s->kstack, s->nkernel, u, nu, true);
	}
	/* The ring buffer refills as fast as a slow user side reads it: stop
	 * this drain (the sample is consumed) so that the loop sees the
	 * deadline, a signal and the period's end. */
	if (!err && S->drain_until && gb_mono_ns() >= S->drain_until)
		err = -EAGAIN;
	return err;
}

static int on_fault(void *ctx, const struct gb_fault *x)
{
	struct session *S = ctx;
	if (S->lines)
		gb_sample_out__fault(S->lines, x);
	return 0;
}

/* Find, launch or scope the targets and load the sampler. */
static int setup(struct session *S, struct gb_sampler_opts *so)
{
	const struct gb_sample_session_opts *o = S->o;
	pid_t pids[GB_SAMPLE_MAX_PIDS];

	if (o->cmd) {
		if (!(S->targets[S->ntargets++] = gb_target__launch(o->cmd, o->aslr)))
			return -1;
	}
	for (size_t i = 0; i < o->npids; i++)
		if (!(S->targets[S->ntargets++] = gb_target__attach(o->pids[i])))
			return -1;
	for (size_t i = 0; i < S->ntargets; i++)
		pids[i] = gb_target__pid(S->targets[i]);
	so->pids = pids;
	so->npids = S->ntargets;
	so->all = o->all;
	if (o->cgroup && cgroup_id(o->cgroup, &so->cgroup_id))
		return -1;
	so->event = o->event;
	so->hz = o->hz;
	so->stacks = o->stacks;
	so->kernel = o->kernel;
	so->stack_size = o->stack_size;
	so->faults = o->faults;
	so->python = !o->no_python && o->mode != GB_SAMPLE_LINES;
	/* Keep nothing until armed: a launched command until it has exec'd,
	 * and with Python frames on, -p targets until gb_pystacks__look() has
	 * registered them (the BPF program reads the frames of registered
	 * processes only: a sample kept before has none). */
	so->wait_exec = o->cmd != NULL || (so->python && S->ntargets > 0);
	so->has_range = o->range.kind != GB_RANGE_NONE;
	if (o->range.kind == GB_RANGE_ADDR) {
		so->start = o->range.has_start ? o->range.start : 0;
		so->end = o->range.has_end ? o->range.end : UINT64_MAX;
	} else if (o->range.kind == GB_RANGE_SYM) {
		/* Empty until resolved (a launched command has not run yet). */
		so->start = UINT64_MAX;
		so->end = 0;
		if (!o->cmd && resolve_range(&o->range, S->targets[0], &so->start, &so->end))
			return -1;
	}
	S->smp = gb_sampler__new(so);
	so->pids = NULL;
	if (!S->smp || gb_sampler__start(S->smp))
		return -1;
	return 0;
}

static bool all_exited(struct session *S)
{
	if (!S->ntargets || S->o->all || S->o->cgroup)
		return false;
	/* A launched command ends the run when it exits, as perf record does. */
	if (S->o->cmd)
		return gb_target__exited(S->targets[0]);
	for (size_t i = 0; i < S->ntargets; i++)
		if (!gb_target__exited(S->targets[i]))
			return false;
	return true;
}

static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Deliver what is pending (within budget_ns, 0: all), timing the user
 * side's work. */
static int drain(struct session *S, const struct gb_sampler_cbs *cbs, uint64_t budget_ns)
{
	double t = thread_cpu_s();
	int err;

	S->drain_until = budget_ns ? gb_mono_ns() + budget_ns : 0;
	err = gb_sampler__drain(S->smp, cbs);
	S->drain_cut = err == -EAGAIN;
	if (S->drain_cut)
		err = 0;   /* on_sample: budget spent */
	S->drain_cpu += thread_cpu_s() - t;
	if (err < 0)
		gb_err("sample: reading samples: %s", strerror(-err));
	return err < 0 ? err : 0;
}

static int loop(struct session *S, const struct gb_sampler_cbs *cbs)
{
	const struct gb_sample_session_opts *o = S->o;
	double deadline = o->duration > 0 ? gb_mono_s() + o->duration : 0, flushed = gb_mono_s();
	uint64_t forgot = gb_mono_ns();
	struct pollfd pfd[1 + GB_SAMPLE_MAX_PIDS];
	size_t n = 0;
	int err;

	pfd[n++] = (struct pollfd){ .fd = gb_sampler__fd(S->smp), .events = POLLIN };
	if (o->cmd || !(o->all || o->cgroup))
		for (size_t i = 0; i < S->ntargets; i++)
			if (gb_target__fd(S->targets[i]) >= 0)
				pfd[n++] = (struct pollfd){ .fd = gb_target__fd(S->targets[i]),
							    .events = POLLIN };
	while (!gb_sigflag_stop()) {
		int timeout = 100;
		if (S->dir) {   /* wake at the period's end */
			uint64_t now = gb_mono_ns();
			uint64_t left = now >= S->period_end ? 0 : (S->period_end - now) / 1000000 + 1;
			if (left < (uint64_t)timeout)
				timeout = (int)left;
		}
		if (deadline) {
			double left = deadline - gb_mono_s();
			if (left <= 0)
				break;
			if (left * 1000 < timeout)
				timeout = (int)(left * 1000) + 1;
		}
		if (poll(pfd, (nfds_t)n, timeout) < 0 && errno != EINTR) {
			gb_err("sample: poll: %s", strerror(errno));
			return -errno;
		}
		uint64_t drained_at = gb_mono_ns();
		/* The maps are read while the processes live, not only when a
		 * sample is named: a drain that falls behind (a slow unwind on
		 * a loaded machine) would otherwise name a short-lived
		 * process's samples after it exited, by its maps at exec. */
		if (S->unw)
			gb_unwinder__refresh(S->unw, REFRESH_NS, ACTIVE_NS);
		if ((err = drain(S, cbs, 100000000ull)))
			return err;
		/* A drain that began after the period's end and emptied the ring
		 * buffer has read every sample of it (each is in the ring buffer
		 * microseconds after it was taken): write it. */
		if (S->dir && !S->drain_cut && drained_at >= S->period_end &&
		    (err = close_period(S, S->period_end)))
			return err;
		/* Continuous mode runs for hours over processes that come and
		 * go: once a second, forget those that exited and have had no
		 * sample for FORGET_NS (libdw's state of a process's modules is
		 * megabytes when separate debug info is installed). */
		if (S->dir && gb_mono_ns() - forgot >= 1000000000ull) {
			forgot = gb_mono_ns();
			/* (the lines of their locations first: the modules go) */
			gb_profile__sources(S->prof);
			gb_profile__sources(S->next);
			size_t gone = gb_unwinder__forget(S->unw, forgot - FORGET_NS);
			if (gone)
				gb_info("sample: %zu exited processes forgotten", gone);
		}
		if (S->lines && gb_mono_s() - flushed >= 1.0) {
			gb_sample_out__flush(S->lines);
			flushed = gb_mono_s();
		}
		if (all_exited(S))
			break;
		/* An exited target's pidfd stays readable: stop polling it. */
		for (size_t i = 1; i < n; i++)
			if (pfd[i].revents & POLLIN)
				pfd[i].fd = -1;
	}
	return 0;
}

static void summary_line(const struct session *S, const struct gb_sampler_stats *st, char *buf,
			 size_t len)
{
	int k = snprintf(buf, len, "%" PRIu64 " kept, %" PRIu64 " seen, %" PRIu64
			 " filtered in the kernel, %" PRIu64 " lost", st->kept, st->seen,
			 st->other + st->out_of_range, st->lost);
	if (S->o->stacks == GB_STACK_DWARF && k > 0 && (size_t)k < len)
		snprintf(buf + k, len - (size_t)k, "; %" PRIu64 " unwound, %" PRIu64 " truncated",
			 S->unwound, S->truncated);
}

/* Write the profile outputs (report or folded, and pprof). */
static int write_profile(struct session *S, const struct gb_sampler_stats *st, double t0,
			 int64_t wall0)
{
	const struct gb_sample_session_opts *o = S->o;
	char line[512], hdr[768];
	int err = 0;

	summary_line(S, st, line, sizeof(line));
	gb_profile__sources(S->prof);
	if (o->mode == GB_SAMPLE_REPORT || o->mode == GB_SAMPLE_FOLDED) {
		FILE *f = fdopen(dup(S->out_fd), "w");
		if (!f) {
			gb_err("sample: %s: %s", o->out ? o->out : "stdout", strerror(errno));
			return -errno;
		}
		if (o->mode == GB_SAMPLE_REPORT) {
			snprintf(hdr, sizeof(hdr), "gebpf sample: %s at %" PRIu64 " Hz: %s",
				 gb_sampler__event(S->smp), gb_sampler__hz(S->smp), line);
			err = gb_profile__report(S->prof, f, o->top, hdr);
		} else {
			err = gb_profile__folded(S->prof, f);
		}
		if (fclose(f) && !err)
			err = -errno;
		if (err) {
			gb_err("sample: %s: write: %s", o->out ? o->out : "stdout", strerror(-err));
			return err;
		}
	}
	if (o->mode != GB_SAMPLE_REPORT)
		fprintf(stderr, "gebpf: sample: %s\n", line);   /* the counts, never hidden */
	if (o->flame) {
		char title[256];
		FILE *f = fdopen(dup(S->flame_fd), "w");
		snprintf(title, sizeof(title), "gebpf sample: %s at %" PRIu64 " Hz: %" PRIu64 " samples",
			 gb_sampler__event(S->smp), gb_sampler__hz(S->smp), st->kept);
		err = f ? gb_flame_write(S->prof, f, title) : -errno;
		if (f && fclose(f) && !err)
			err = -errno;
		if (err) {
			gb_err("sample: --flamegraph %s: write: %s", o->flame, strerror(-err));
			return err;
		}
	}
	if (o->pprof) {
		struct gb_pprof_info info = {
			.period_ns = 1000000000ull / gb_sampler__hz(S->smp),
			.time_ns = wall0,
			.duration_ns = (int64_t)((gb_mono_s() - t0) * 1e9),
			.main_pid = S->ntargets ? gb_target__pid(S->targets[0]) : 0,
		};
		err = gb_pprof_write(S->prof, &info, S->pprof_fd, o->pprof);
	}
	return err;
}

int gb_sample_session_run(const struct gb_sample_session_opts *o)
{
	struct session S = { .o = o, .out_fd = -1, .pprof_fd = -1, .flame_fd = -1 };
	struct gb_sampler_opts so = { 0 };
	struct gb_sampler_cbs cbs = { .sample = on_sample, .fault = on_fault, .ctx = &S };
	struct gb_sampler_stats st = { 0 };
	struct timespec wall;
	int ret = GB_EXIT_FAIL, err;
	double t0;

	if (setup(&S, &so))
		goto cleanup;
	/* Every check passed: now the outputs. */
	S.out_fd = o->out ? open_output(o->out) : STDOUT_FILENO;
	if (S.out_fd < 0 || (o->pprof && (S.pprof_fd = open_output(o->pprof)) < 0) ||
	    (o->flame && (S.flame_fd = open_output(o->flame)) < 0))
		goto cleanup;
	if (o->mode == GB_SAMPLE_LINES || (o->mode == GB_SAMPLE_PPROF_ONLY && o->out && !o->pprof_dir)) {
		S.lines = gb_sample_out__new(S.out_fd);
		if (!S.lines) {
			gb_err("sample: %s", strerror(ENOMEM));
			goto cleanup;
		}
	}
	if (o->mode != GB_SAMPLE_LINES) {
		if (o->kernel && !(S.ksyms = gb_kallsyms__new()))
			gb_warn("sample: /proc/kallsyms: %s: kernel frames stay unnamed",
				strerror(errno));
		S.unw = gb_unwinder__new();   /* after launching: its first read raises our fd limit */
		S.prof = new_profile(&S);
		if (!o->no_python)
			S.py = gb_pystacks__new(S.smp);
		if (o->pprof_dir) {
			if (!(S.dir = gb_pprof_dir__new(o->pprof_dir, o->keep, o->max_age)))
				goto cleanup;
			S.next = new_profile(&S);
			S.every_ns = (uint64_t)(o->every * 1e9);
		}
		if (!S.unw || !S.prof || (!o->no_python && !S.py) || (o->pprof_dir && !S.next)) {
			gb_err("sample: %s", strerror(ENOMEM));
			goto cleanup;
		}
		/* (the maps read beside the drain: without the thread, between drains) */
		int kerr = gb_unwinder__keep(S.unw, REFRESH_NS, ACTIVE_NS);
		if (kerr)
			gb_warn("sample: no thread to read the maps beside the drain (%s): a "
				"process that exits before its samples are named is named by "
				"the maps read last", strerror(-kerr));
	}
	clock_gettime(CLOCK_REALTIME, &wall);
	t0 = gb_mono_s();
	S.mono0 = S.period_start = gb_mono_ns();
	S.wall0 = (int64_t)wall.tv_sec * 1000000000 + wall.tv_nsec;
	S.period_end = S.period_start + S.every_ns;
	for (size_t i = 0; i < S.ntargets; i++)
		if (gb_target__release(S.targets[i]))
			goto cleanup;
	/* Python targets read before they run: a launched one right after its
	 * exec, so its first Python frames are seen. */
	for (size_t i = 0; S.py && i < S.ntargets; i++)
		gb_pystacks__look(S.py, gb_target__pid(S.targets[i]));
	gb_sampler__arm(S.smp);
	for (size_t i = 0; i < S.ntargets; i++)
		gb_target__go(S.targets[i]);
	for (size_t i = 0; S.unw && !(o->all || o->cgroup) && i < S.ntargets; i++)
		gb_unwinder__prepare(S.unw, gb_target__pid(S.targets[i]));
	if (o->range.kind == GB_RANGE_SYM && o->cmd) {
		if (resolve_range(&o->range, S.targets[0], &so.start, &so.end))
			goto cleanup;
		gb_sampler__set_range(S.smp, so.start, so.end);
	}
	gb_info("sample: %s at %" PRIu64 " Hz%s", gb_sampler__event(S.smp), gb_sampler__hz(S.smp),
		o->faults ? ", page faults" : "");

	if (loop(&S, &cbs))
		goto cleanup;
	/* Detach first, then read what is left: nothing arrives after this. */
	gb_sampler__stop(S.smp);
	uint64_t stopped = gb_mono_ns();
	if (drain(&S, &cbs, 0))
		goto cleanup;
	/* Continuous mode: the period under way, and the last, partial one. */
	while (S.dir && stopped > S.period_end)
		if (close_period(&S, S.period_end))
			goto cleanup;
	if (S.dir && close_period(&S, stopped))
		goto cleanup;
	gb_sampler__stats(S.smp, &st);
	gb_info("sample: user side: %.3f s of CPU for %" PRIu64 " samples", S.drain_cpu, st.kept);
	if (S.py) {
		struct gb_pystacks_stats ps;
		gb_pystacks__stats(S.py, &ps);
		gb_info("sample: Python: %" PRIu64 " processes, %" PRIu64 " samples with %" PRIu64
			" Python frames (%" PRIu64 " left out: code object unreadable)", ps.procs, ps.samples,
			ps.frames, ps.unnamed);
	}
	if (st.lost || st.faults_lost)
		gb_warn("sample: %" PRIu64 " samples and %" PRIu64 " faults lost (ring buffer full)",
			st.lost, st.faults_lost);
	if (S.lines) {
		struct gb_sample_summary sum = {
			.st = st, .event = gb_sampler__event(S.smp), .hz = gb_sampler__hz(S.smp),
			.has_range = so.has_range, .start = so.start, .end = so.end,
			.faults = o->faults,
		};
		err = gb_sample_out__finish(S.lines, &sum);
		if (err) {
			gb_err("sample: %s: write: %s", o->out ? o->out : "stdout", strerror(-err));
			goto cleanup;
		}
	}
	if (o->mode != GB_SAMPLE_LINES &&
	    write_profile(&S, &st, t0, (int64_t)wall.tv_sec * 1000000000 + wall.tv_nsec))
		goto cleanup;
	if (S.unwritten) {
		gb_err("sample: --pprof-dir %s: %" PRIu64 " of %" PRIu64 " profiles not written",
		       o->pprof_dir, S.unwritten, S.unwritten + gb_pprof_dir__count(S.dir));
		goto cleanup;
	}
	ret = GB_EXIT_OK;
cleanup:
	gb_sampler__free(S.smp);   /* unloads every program, on every path */
	for (size_t i = 0; i < S.ntargets; i++)
		gb_target__free(S.targets[i]);   /* kills a launched command still running */
	gb_sample_out__free(S.lines);
	gb_profile__free(S.prof);
	gb_pystacks__free(S.py);
	gb_profile__free(S.next);
	gb_pprof_dir__free(S.dir);
	gb_unwinder__free(S.unw);
	gb_kallsyms__free(S.ksyms);
	if (S.out_fd >= 0 && S.out_fd != STDOUT_FILENO && close(S.out_fd) && ret == GB_EXIT_OK) {
		gb_err("sample: %s: %s", o->out, strerror(errno));
		ret = GB_EXIT_FAIL;
	}
	if (S.pprof_fd >= 0)
		close(S.pprof_fd);
	if (S.flame_fd >= 0)
		close(S.flame_fd);
	return ret;
}
