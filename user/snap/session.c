/* gebpf snap from start to end: see session.h.
 * Order: check the output, freeze (attach, capture with a copy-on-write
 * copy), release the target, copy the bytes from the copy, sync
 * (docs/snap.md). */
#include "snap/session.h"

#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/guard.h"
#include "common/log.h"
#include "common/sigflag.h"
#include "ptrace/runto.h"
#include "ptrace/tracee.h"
#include "snap/cow.h"
#include "snap/launch.h"
#include "snap/point.h"
#include "snap/snapshot.h"
#include "sym/boundary.h"
#include "sym/syms.h"

/* A breakpoint planted inside an instruction would corrupt it and never
 * be reached: such an --at is refused. */
static bool inside_insn(pid_t pid, const char *at, uint64_t addr)
{
	struct gb_boundary b;
	if (gb_boundary_check(pid, addr, &b) || b.kind != GB_BOUNDARY_INSIDE)
		return false;
	gb_err("snap: --at %s: 0x%" PRIx64 " is inside the instruction at 0x%" PRIx64 " (%s+0x%" PRIx64
	       "); run to an instruction: 0x%" PRIx64 " or 0x%" PRIx64, at, addr, b.prev, b.func,
	       b.prev - b.fn, b.prev, b.next);
	return true;
}

/* The address of --at in pid (sym/syms.h resolves the symbol); a bare-hex
 * name that no symbol has is an address. */
static int resolve_at(struct gb_tracee *t, pid_t tid, struct gb_snap_rng *det,
		      const struct gb_snap_opts *o, uint64_t *addr, char *point, size_t plen)
{
	char what[300];
	uint64_t hex = 0, entry;
	pid_t pid = t->pid;
	bool sym = o->at_spec.kind == GB_RANGE_SYM;
	bool hex_ok = sym && !o->at_spec.module[0] && gb_parse_hex(o->at, &hex) == 0;
	struct gb_range_spec r;
	snprintf(what, sizeof(what), "snap: --at %s", o->at);
	/* A launched command's libraries are mapped, and their IFUNCs bound,
	 * once the dynamic loader is done: at the entry point. */
	if (o->argv && sym && !hex_ok && gb_sym_range_resolve(&o->at_spec, pid, &r, NULL) &&
	    (entry = gb_auxv_entry(pid)))
		det ? gb_snap_run_to_det(t, tid, entry, det) : gb_run_to(t, tid, entry);
	if (gb_sym_range_resolve(&o->at_spec, pid, &r, hex_ok ? NULL : what)) {
		if (!hex_ok)
			return -1;
		sym = false;
		r.start = hex;
	}
	*addr = r.start;
	if ((!sym || strchr(o->at, '+')) && inside_insn(pid, o->at, *addr))
		return -1;
	if (sym)
		snprintf(point, plen, "at 0x%" PRIx64 " (%s)", *addr, o->at);
	else
		snprintf(point, plen, "at 0x%" PRIx64, *addr);
	return 0;
}

static void default_out(const struct gb_snap_opts *o, char *buf, size_t len)
{
	if (o->pid) {
		snprintf(buf, len, "snap-%d.core", o->pid);
	} else {
		const char *b = strrchr(o->argv[0], '/');
		snprintf(buf, len, "snap-%s.core", b ? b + 1 : o->argv[0]);
	}
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Let the target go: detach (a launched program runs on; its pid goes to
 * *wait_pid), or kill a launched one when asked or when things failed. */
static void release(const struct gb_snap_opts *o, struct gb_tracee *t, bool ok, bool *have, pid_t *wait_pid)
{
	if (!*have)
		return;
	*have = false;
	if (o->argv && (!ok || o->kill_after || gb_sigflag_stop())) {
		gb_tracee_kill(t);
		return;
	}
	*wait_pid = t->launched && !t->exited ? t->pid : 0;
	gb_tracee_detach(t);
}

/* Fail before stopping anything when FILE cannot be written; *outdir is
 * its directory (in *dir, to be freed). */
static int check_out(const char *out, char **dir, const char **outdir)
{
	struct stat st;
	size_t n = strlen(out);
	if (!n) {
		gb_err("snap: -o: empty file name");
		return GB_EXIT_USAGE;
	}
	if (out[n - 1] == '/' || (stat(out, &st) == 0 && S_ISDIR(st.st_mode))) {
		gb_err("snap: %s: is a directory (give a file name)", out);
		return GB_EXIT_FAIL;
	}
	*dir = strdup(out);
	if (!*dir)
		return GB_EXIT_FAIL;
	/* dirname may return a static "." instead of changing dir. */
	*outdir = dirname(*dir);
	if (access(*outdir, W_OK | X_OK)) {
		gb_err("snap: %s: cannot create a file there: %s", out, strerror(errno));
		return GB_EXIT_FAIL;
	}
	return GB_EXIT_OK;
}

int gb_snap_session_run(const struct gb_snap_opts *in)
{
	struct gb_snap_opts o = *in;
	struct gb_tracee t;
	struct gb_snapshot *s = NULL;
	struct gb_snap_save_stats st = { .interruptible = true };
	char point[320] = "attach", outbuf[300], *dir = NULL;
	const char *outdir;
	pid_t init = 0, wait_pid = 0;
	int ret = GB_EXIT_FAIL, r;
	bool have_tracee = false;
	struct gb_snap_rng rng, *det = NULL;
	struct gb_snap_cow_plan *plan = NULL;
	double t0, t_freeze;

	if (!o.out) {
		default_out(&o, outbuf, sizeof(outbuf));
		o.out = outbuf;
	}
	if (o.verbose)
		gb_log_set_verbose(true);
	if ((ret = check_out(o.out, &dir, &outdir))) {
		free(dir);
		return ret;
	}
	ret = GB_EXIT_FAIL;
	/* The tracer is a worker process: a SIGKILL of this one makes it end
	 * the capture as SIGTERM does (common/guard.h, docs/snap.md). */
	gb_guard();
	gb_sigflag_install();
	t0 = now_ms();
	if (o.argv) {
		init = gb_snap_launch_env(o.pidns);
		struct gb_launch_opts lo = { .argv = o.argv, .aslr = o.aslr };
		if (gb_tracee_launch(&lo, &t))
			goto cleanup;
		have_tracee = true;
		if (o.fix_random) {
			gb_snap_rng_init(&rng);
			det = &rng;
			if ((r = gb_snap_fix_random(t.pid, det)))
				gb_warn("snap: %s: cannot fix the AT_RANDOM bytes: %s", o.argv[0], strerror(-r));
		}
		snprintf(point, sizeof(point), "exec");
	} else {
		/* What the copy-on-write copy will lack, read before stopping. */
		if (!o.no_fork)
			plan = gb_snap_cow_plan__read(o.pid);
		t0 = now_ms();
		if (gb_tracee_attach(o.pid, &t))
			goto cleanup;
		have_tracee = true;
	}

	pid_t tid = t.threads[0].tid;
	if (o.at) {
		uint64_t addr;
		if (resolve_at(&t, tid, det, &o, &addr, point, sizeof(point)))
			goto cleanup;
		r = det ? gb_snap_run_to_det(&t, tid, addr, det) : gb_run_to(&t, tid, addr);
		if (r) {
			gb_err("snap: pid %d: %s before reaching %s", t.pid,
			       r == -ESRCH ? "the process exited" : r == -EINTR ? "interrupted" : strerror(-r),
			       o.at);
			goto cleanup;
		}
		gb_snap_collect_threads(&t);
	} else if (o.has_after) {
		uint64_t done;
		r = gb_snap_step_det(&t, tid, o.after, &done, det);
		if (r) {
			gb_err("snap: pid %d: %s after %" PRIu64 " of %" PRIu64 " instructions", t.pid,
			       r == -ESRCH ? "the process exited" : r == -EINTR ? "interrupted" : strerror(-r),
			       done, o.after);
			goto cleanup;
		}
		snprintf(point, sizeof(point), "after %" PRIu64, o.after);
	}

	struct gb_snap_point pt = { .tid = o.at || o.has_after || o.argv ? tid : 0, .vt = -1, .point = point };
	if (o.has_after)
		pt.vt = (int64_t)o.after;
	/* A launched program was stopped for us anyway: its freeze is the capture. */
	if (o.argv)
		t0 = now_ms();
	struct gb_snap_capture_opts co = { .fork = !o.no_fork, .scratch_dir = outdir, .plan = plan };
	if (gb_snapshot_capture_opts(&t, &pt, &co, &s))
		goto cleanup;
	/* A process stopped by job control stays stopped (the detach puts its
	 * threads back into its group-stop: docs/snap.md). */
	int stopped_by = t.stopped_by;
	if (co.forked) {
		release(&o, &t, true, &have_tracee, &wait_pid);
		t_freeze = now_ms() - t0;
		gb_info("snap: freeze %.1f ms (registers, maps, copy-on-write copy pid %d); the process %s",
			t_freeze, gb_snapshot_source_pid(s),
			stopped_by ? "is let go, stopped as it was found" : "runs again");
	}
	if (gb_snapshot_save_stats(s, o.out, &st))
		goto cleanup;
	if (!co.forked) {
		release(&o, &t, true, &have_tracee, &wait_pid);
		t_freeze = now_ms() - t0;
		gb_info("snap: freeze %.1f ms (no copy: stopped until the file was written)%s", t_freeze,
			stopped_by ? "; let go, stopped as it was found" : "");
	}
	gb_info("snap: copy %.1f ms (%.1f MiB of maps, %.1f MiB written, %.0f MiB/s)", st.copy_s * 1e3,
		(double)st.bytes / 1048576.0, (double)st.written / 1048576.0,
		st.copy_s > 0 ? (double)st.bytes / 1048576.0 / st.copy_s : 0.0);
	gb_info("snap: sync %.1f ms (fsync, link into place)", st.sync_s * 1e3);
	printf("%s\n", o.out);
	fflush(stdout);
	ret = GB_EXIT_OK;
cleanup:
	gb_snapshot_free(s);
	release(&o, &t, ret == GB_EXIT_OK, &have_tracee, &wait_pid);
	/* A launched program runs on to its end. */
	while (wait_pid > 0 && waitpid(wait_pid, NULL, 0) < 0 && errno == EINTR)
		if (gb_sigflag_stop())
			kill(wait_pid, SIGKILL);
	gb_snap_launch_env_end(init);
	gb_snap_cow_plan__free(plan);
	free(dir);
	return ret;
}
