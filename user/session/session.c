/* gebpf trace, start to end: see session.h. */
#include "session/session.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/guard.h"
#include "common/log.h"
#include "common/sigflag.h"
#include "probe/faults.h"
#include "probe/probetrap.h"
#include "ptrace/maps.h"
#include "ptrace/runto.h"
#include "ptrace/tracee.h"
#include "record/jsonl.h"
#include "record/output.h"
#include "record/recording.h"
#include "resume/resume.h"
#include "session/report.h"
#include "session/seccomp_fit.h"
#include "session/session_int.h"
#include "snap/snapshot.h"
#include "sym/entries.h"
#include "sym/modfile.h"
#include "sym/syms.h"
#include "trace/engine.h"
#include "trace/range.h"
#include "trace/trap.h"
#include "trace/xol.h"
#include "trap/patch/leftover.h"
#include "trap/probes/probes.h"
#include "trap/traps.h"


/* After the checks (target, range): a refused command leaves no file. */
static int open_output(struct session *s)
{
	const struct gb_trace_opts *o = s->o;
	if (o->out_dir) {
		s->rec = gb_recording__open(o->out_dir, o->force);
		if (!s->rec)
			return -1;
		gb_recording__set_zstd(s->rec, o->zstd);
		s->fd = gb_recording__trace_fd(s->rec);
		s->out_name = o->out_dir;
		s->out_own = true;
		return 0;
	}
	if (!o->out_file) {
		s->fd = STDOUT_FILENO;
		s->out_name = "stdout";
		return 0;
	}
	if (gb_output_open(&s->file, o->out_file, GB_OUTPUT_SHARED))
		return -1;
	s->fd = s->file.fd;
	s->out_name = o->out_file;
	s->out_own = s->file.own;
	return 0;
}

/* Attach mode: the range resolved, its entries scanned, the output opened
 * before the target is stopped (docs/trace.md "The patch trap", "At the start";
 * resolve_range compares the range's maps).  0 not done, 1 done, -1 failed. */
static int early(struct session *s)
{
	const struct gb_trace_opts *o = s->o;
	char why[256];
	if (!o->pid || o->from || gb_pid_problem(o->pid, why, sizeof(why)) ||
	    gb_sym_range_resolve(&o->range, o->pid, &s->range, NULL))
		return 0;
	s->early_key = gb_trace_range_early(o->pid, &s->range, o->trap != GB_TRAP_NONE);
	/* The uprobe program the probe trap, or the patch trap's refused
	 * entries, would load while the target is stopped (~20 ms). */
	if (o->trap == GB_TRAP_AUTO || o->trap == GB_TRAP_PATCH || o->trap == GB_TRAP_PROBES)
		gb_probetrap__prepare(&(struct gb_probetrap_opts){
			.tgid = o->pid, .redirect = o->trap != GB_TRAP_PROBES });
	return open_output(s) ? -1 : 1;
}

static const char *signame(int sig)
{
	const char *n = sigabbrev_np(sig);
	static char buf[32];
	snprintf(buf, sizeof(buf), "SIG%s", n ? n : "?");
	return buf;
}

static int start_target(struct session *s)
{
	const struct gb_trace_opts *o = s->o;
	int r;
	if (o->from) {
		r = gb_resume_start(o->from, &s->t, &s->first_vt);
	} else if (o->pid) {
		r = gb_tracee_attach(o->pid, &s->t);
		s->t.say_windows = true;
		/* (As gdb attaches: it stays stopped, docs/trace.md "A stopped
		 * process".) */
		if (!r && s->t.stopped_by)
			gb_warn("pid %d is stopped (%s, job control): nothing runs until it gets "
				"SIGCONT; what runs then is traced, and it is left stopped if it still "
				"is at the end", o->pid, signame(s->t.stopped_by));
	} else {
		struct gb_launch_opts lo = { .argv = o->argv, .aslr = o->aslr };
		r = gb_tracee_launch(&lo, &s->t);
		/* The same layout under every trap: the kernel's uprobe page is
		 * placed before the program maps anything (docs/trace.md); its
		 * uprobe goes once the trap is known (xol_release), or before
		 * anything reads code near it or runs the program. */
		if (!r)
			gb_xol_hold(s->t.pid, s->t.pid, &s->xol);
	}
	if (r)
		return -1;
	s->have_target = true;
	return 0;
}

/* The target's executable (for its RUNPATH), or NULL. */
static const char *target_exe(const struct session *s, char *buf, size_t len)
{
	char link[64];
	snprintf(link, sizeof(link), "/proc/%d/exe", s->t.pid);
	ssize_t n = readlink(link, buf, len - 1);
	if (n <= 0)
		return NULL;
	buf[n] = 0;
	return buf;
}

/* Resolve the range in the live process.  A MODULE:SYMBOL whose module is
 * not mapped yet (a library an exec chain or dlopen maps later) is pending:
 * resolved from the file, and traced by the probe trap once mapped.
 * Without the probe trap, launch mode runs to the entry point first (the
 * dynamic loader maps the direct dependencies). */
/* The launch's uprobe (trace/xol.h) is clear of [lo, hi] (its instruction
 * 256 bytes or more away: none of the bytes gebpf reads there). */
static bool xol_clear_of(const struct session *s, uint64_t lo, uint64_t hi)
{
	uint64_t at = gb_xol_addr(s->xol);
	return at + 256 < lo || at > hi + 256;
}

/* The sized function symbol holding addr starts at (addr when none). */
static uint64_t func_start(const struct session *s, uint64_t addr)
{
	char name[256];
	uint64_t fn = addr, size = 0;
	struct gb_syms *sy = gb_syms__new(s->t.pid);
	if (!sy || gb_syms__func_at(sy, addr, name, sizeof(name), &fn, &size))
		fn = addr;
	gb_syms__free(sy);
	return fn;
}

/* The launch's uprobe goes before the trap reads the program's code or
 * steps it.  Only under the patch trap, with the instruction it probed (the
 * entry point's) clear of the range's function and the range (and of the
 * nops before it), is it removed after the program ran past it: the set-up
 * does not wait for the kernel's grace periods (35-50 ms). */
static void xol_release(struct session *s)
{
	bool later = s->xol && s->trap == GB_TRAP_PATCH && !s->range_pending &&
		     s->range.has_start && s->range.has_end && !s->o->faults && !s->o->nsnap_pcs &&
		     xol_clear_of(s, func_start(s, s->range.start), s->range.end);
	gb_xol_release(s->xol, later);
	s->xol = NULL;
}

static void xol_release_now(struct session *s)
{
	gb_xol_release(s->xol, false);
	s->xol = NULL;
}

static int resolve_range(struct session *s)
{
	const struct gb_range_spec *spec = &s->o->range;
	bool retry = s->o->argv && spec->kind == GB_RANGE_SYM;
	/* Pending: the probe trap learns the range at its first hit, --trap
	 * none after each mmap; the page trap needs it now. */
	bool pendable = spec->kind == GB_RANGE_SYM && spec->module[0] && s->o->trap != GB_TRAP_PAGES;
	char what[sizeof(s->range_text) + 8], exe[4096];
	gb_range_describe(spec, s->range_text, sizeof(s->range_text));
	snprintf(what, sizeof(what), "range %s", s->range_text);
	bool quiet = retry || pendable;   /* a second try follows */
	int r = 0;
	if (!s->early_key || s->early_key != gb_trace_range_maps_key(s->t.pid, s->range.start,
								     s->range.end))
		r = gb_sym_range_resolve(spec, s->t.pid, &s->range, quiet ? NULL : what);
	if (r && pendable &&
	    gb_modfile_resolve(spec->module, spec->symbol, target_exe(s, exe, sizeof(exe)),
			       s->pending_path, sizeof(s->pending_path), &s->pending_lo,
			       &s->pending_hi, NULL) == 0) {
		s->range_pending = true;
		s->range.has_start = s->range.has_end = true;
		s->range.start = s->range.end = 0;
		gb_warn("range %s: %s is not mapped in pid %d yet; tracing it once it is",
			s->range_text, s->pending_path, s->t.pid);
		return 0;
	}
	if (r && retry) {
		uint64_t entry = gb_auxv_entry(s->t.pid);
		xol_release_now(s); /* (the program runs, maps its libraries) */
		if (entry)
			gb_run_to(&s->t, s->t.pid, entry);
	}
	if (r && quiet)
		r = gb_sym_range_resolve(spec, s->t.pid, &s->range, what);
	if (r)
		return -1;
	if (spec->kind == GB_RANGE_SYM)
		gb_info("range %s = 0x%llx-0x%llx", s->range_text, (unsigned long long)s->range.start,
			(unsigned long long)s->range.end);
	/* An address range starting mid-instruction would be decoded (and
	 * probed, patched) from a wrong alignment (docs/trace.md "Range"). */
	else if (spec->kind == GB_RANGE_ADDR && spec->has_start) {
		/* (it reads the code from the start's function to the start) */
		if (s->xol && !xol_clear_of(s, func_start(s, s->range.start), s->range.start + 16))
			xol_release_now(s);
		if (gb_trace_range_check_start(s->t.pid, s->range_text, s->range.start))
			return -1;
	}
	return 0;
}

/* The range in one file's code: its file, link-time bounds and bias (0), or
 * why not (code on writable pages, anonymous memory, several mappings). */
static int rerange(void *ctx, pid_t pid, uint64_t *start, uint64_t *end)
{
	struct session *s = ctx;
	struct gb_range_spec r;
	if (s->o->range.kind != GB_RANGE_SYM)
		return -1;
	if (gb_sym_range_resolve(&s->o->range, pid, &r, NULL)) {
		if (s->o->range.module[0]) {
			s->range_pending = true; /* its module may be mapped later */
			return -EAGAIN;
		}
		gb_warn("range %s after exec: not found in the new program; keeping 0x%llx-0x%llx",
			s->range_text, (unsigned long long)*start, (unsigned long long)*end);
		return -1;
	}
	if (s->range_pending)
		gb_info("range %s: mapped at 0x%llx-0x%llx", s->range_text,
			(unsigned long long)r.start, (unsigned long long)r.end);
	s->range_pending = false;
	*start = r.start;
	*end = r.end;
	return 0;
}

/* --faults: a fault belongs to the instruction just stepped when its
 * thread and ip match; the rest (native code, out-of-range steps) are not
 * in the trace. */
static int on_fault(void *ctx, const struct gb_fault *f)
{
	struct session *s = ctx;
	if (f->tid == s->fault_tid && f->ip == s->fault_pc)
		gb_jsonl__fault(s->out, s->fault_vcpu, f->addr, f->ip, f->err, s->fault_vt);
	return 0;
}

static void merge_faults(void *ctx, struct gb_engine *e, pid_t tid, uint32_t vcpu, uint64_t pc,
			 uint64_t vt)
{
	struct session *s = ctx;
	s->fault_tid = tid;
	s->fault_vcpu = vcpu;
	s->fault_pc = pc;
	s->fault_vt = vt;
	gb_faults__drain(s->faults, on_fault, s);
	(void)e;
}

static int start_faults(struct session *s)
{
	struct gb_faults_opts fo = { .tgid = s->t.pid };
	s->faults = gb_faults__new(&fo);
	if (!s->faults)
		return -1;
	if (gb_faults__start(s->faults)) {
		gb_faults__free(s->faults);
		s->faults = NULL;
		return -1;
	}
	return 0;
}

/* --snap-at: blobs/snap-<vt>.core in the recording directory. */
static int take_snapshot(void *ctx, struct gb_tracee *t, pid_t tid, uint64_t vt, uint64_t pc)
{
	struct session *s = ctx;
	char point[64], name[64], path[4200];
	struct gb_snapshot *snap = NULL;
	snprintf(point, sizeof(point), "pc=0x%llx", (unsigned long long)pc);
	snprintf(name, sizeof(name), "snap-%llu.core", (unsigned long long)vt);
	struct gb_snap_point pt = { .tid = tid, .vt = (int64_t)vt, .point = point };
	/* A failure is said by the snap room (naming the pid or the file). */
	int r = gb_snapshot_capture(t, &pt, &snap);
	if (!r)
		r = gb_snapshot_save(snap, gb_recording__blob_path(s->rec, name, path, sizeof(path)));
	gb_snapshot_free(snap);
	if (r)
		return r;
	return gb_recording__add_snapshot(s->rec, vt, pc, tid, name);
}

static int report_end(struct session *s, enum gb_end why, const struct gb_jsonl_counts *c)
{
	pid_t pid = s->t.pid;
	int st = gb_engine__exit_status(s->eng);
	switch (why) {
	case GB_END_MAX_INSNS:
	case GB_END_DURATION:
		return GB_EXIT_OK;
	case GB_END_EXITED:
		if (WIFSIGNALED(st)) {
			gb_err("pid %d: killed by %s during the trace (%llu in-range instructions traced)",
			       pid, signame(WTERMSIG(st)), (unsigned long long)gb_engine__vt(s->eng));
			return GB_EXIT_FAIL;
		}
		if (s->o->pid) {
			gb_err("pid %d: exited with status %d during the trace", pid, WEXITSTATUS(st));
			return GB_EXIT_FAIL;
		}
		return GB_EXIT_OK;
	case GB_END_SIGNAL:
		/* Ctrl-C/SIGTERM is an ordinary way to end a trace (docs/trace.md "Ending"). */
		gb_err("trace: stopped by %s after %llu in-range instructions; summary written to %s",
		       signame(gb_sigflag_signo()), (unsigned long long)gb_engine__vt(s->eng), s->out_name);
		return GB_EXIT_OK;
	case GB_END_OUTPUT: {
		char what[200];
		gb_err("%s: %s: %llu lines dropped", s->out_name,
		       gb_jsonl__failure(s->out, what, sizeof(what)), (unsigned long long)c->dropped);
		return GB_EXIT_FAIL;
	}
	default:
		return GB_EXIT_FAIL;
	}
}

/* The entry trap chosen (gb_session__choose_trap), made for the engine.  A page trap
 * with nothing to trap leaves the null trap (the trace is the same). */
static int make_trap(struct session *s)
{
	if (s->trap == GB_TRAP_PATCH && s->range_pending) {
		s->entry_trap = gb_trap_patch_pending(&s->t, &s->live);
		if (s->entry_trap)
			gb_trap_patch_asked(s->entry_trap, s->o->trap == GB_TRAP_PATCH);
		else
			gb_err("trace: pid %d: cannot set up the trace: %s", s->t.pid, strerror(ENOMEM));
		return s->entry_trap ? 0 : -1;
	}
	if (s->trap == GB_TRAP_PATCH) {
		/* Not asked for: a refusal is said under -v only. */
		gb_log_demote_warnings(s->o->trap != GB_TRAP_PATCH);
		s->entry_trap = gb_trap_patch_new(&s->t, &s->live, s->file_path, s->file_lo,
						  s->file_hi, s->file_bias);
		gb_log_demote_warnings(false);
		if (s->entry_trap) {
			gb_trap_patch_asked(s->entry_trap, s->o->trap == GB_TRAP_PATCH);
			return 0;
		}
		if (gb_session__patch_refused(s)) /* (said why) */
			return -1;
	}
	if (s->trap == GB_TRAP_PROBES) {
		s->entry_trap = gb_trap_probes_new(s->probes, &s->live);
		if (s->entry_trap)
			s->probes = NULL; /* the trap's now */
	} else if (s->trap == GB_TRAP_PAGES) {
		s->entry_trap = gb_trap_pages_new(s->t.pid, &s->live);
		if (!s->entry_trap) {
			/* No code in the range yet, or the range covers every
			 * syscall instruction we could inject through. */
			gb_warn("pid %d: no page trap for 0x%llx-0x%llx; single-stepping everything "
				"(slow)", s->t.pid, (unsigned long long)s->range.start,
				(unsigned long long)s->range.end);
		}
	}
	if (!s->entry_trap)
		s->entry_trap = gb_trap_none_new(&s->live);
	if (!s->entry_trap)
		gb_err("trace: pid %d: cannot set up the trace: %s", s->t.pid, strerror(ENOMEM));
	return s->entry_trap ? 0 : -1;
}

int gb_trace_session_run(const struct gb_trace_opts *o)
{
	struct session s;
	int rc = GB_EXIT_FAIL;
	memset(&s, 0, sizeof(s));
	s.o = o;
	s.fd = -1;
	s.file.fd = -1;
	gb_sigflag_install();

	int pre = early(&s);
	if (pre < 0 || start_target(&s))
		goto cleanup;
	/* Before a byte of its code is read: what an earlier gebpf left
	 * (trap/patch/leftover.h) */
	struct gb_leftovers lo;
	if (o->pid && !o->from && gb_leftovers_take(s.t.pid, &lo))
		goto cleanup;
	if (resolve_range(&s)) {
		rc = GB_EXIT_USAGE;
		goto cleanup;
	}
	if (!pre && open_output(&s))
		goto cleanup;

	if (gb_session__choose_trap(&s))
		goto cleanup;
	if (s.trap != GB_TRAP_NONE) {
		for (size_t k = 0; k < o->nsnap_pcs; k++)
			if (s.range_pending || o->snap_pcs[k] < s.range.start ||
			    o->snap_pcs[k] > s.range.end) {
				gb_err("--snap-at pc=0x%llx: outside the range %s (only in-range code is "
				       "stepped; add --trap none)", (unsigned long long)o->snap_pcs[k],
				       s.range_text);
				rc = GB_EXIT_USAGE;
				goto cleanup;
			}
	}
	bool jit = o->engine != GB_ENGINE_STEP && s.trap != GB_TRAP_NONE;
	bool patch = s.trap == GB_TRAP_PATCH;
	gb_trace_seccomp_fit(&s.t, s.range.start, &s.trap, &jit); /* before anything is injected */
	if (patch && s.trap != GB_TRAP_PATCH && gb_session__patch_refused(&s)) /* (said why) */
		goto cleanup;
	xol_release(&s);
	if (o->faults && start_faults(&s))
		goto cleanup;

	struct gb_jsonl_opts jo = {
		.exec = o->exec, .max_events = o->max_events, .faults = o->faults,
		.duration = o->duration, .direct = s.out_own, .zstd = o->zstd,
		.has_start = s.range.has_start, .has_end = s.range.has_end,
		.start = s.range.start, .end = s.range.end,
	};
	s.out = gb_jsonl__new(s.fd, &jo);
	if (!s.out) {
		gb_err("trace: pid %d: cannot set up the trace: %s", s.t.pid, strerror(errno ? errno : ENOMEM));
		goto cleanup;
	}
	s.live = (struct gb_trace_range){
		.has_start = s.range.has_start, .has_end = s.range.has_end,
		.start = s.range.start, .end = s.range.end, .pending = s.range_pending,
		.out = s.out, .rerange = rerange, .rerange_ctx = &s,
	};
	if (make_trap(&s))
		goto cleanup;
	if (o->engine == GB_ENGINE_JIT && s.trap == GB_TRAP_NONE)
		gb_warn("trace: --engine jit: with no entry trap (--trap none) every instruction is "
			"single-stepped; the step engine traces the range");
	struct gb_engine_opts eo = {
		.range = &s.live, .trap = s.entry_trap,
		.max_insns = o->max_insns, .first_vt = s.first_vt, .duration = o->duration,
		/* The patch trap: the program runs beside gebpf's drain, and the
		 * range is translated in its own cache. */
		.pin = o->pin && s.trap != GB_TRAP_PATCH, .jit = jit && s.trap != GB_TRAP_PATCH,
		.values = o->values,
		.snap_pcs = o->snap_pcs, .nsnap_pcs = o->nsnap_pcs,
		.snap_vts = o->snap_vts, .nsnap_vts = o->nsnap_vts,
		.snap_cb = take_snapshot, .snap_ctx = &s,
		.faults_cb = s.faults ? merge_faults : NULL, .faults_ctx = &s,
	};
	if (!(s.eng = gb_engine__new(&s.t, &eo, s.out))) {
		gb_err("trace: pid %d: cannot set up the trace: %s", s.t.pid, strerror(errno ? errno : ENOMEM));
		goto cleanup;
	}

	enum gb_end why = gb_engine__run(s.eng);
	struct gb_engine_stats es;
	gb_engine__stats(s.eng, &es);
	const char *trap_name = gb_trap_name(s.entry_trap);
	/* Every thread is held: the uprobes go before any of them runs
	 * untraced again.  Attached and nothing of the trap left in it: it
	 * runs on while gebpf frees the trap and finishes the output. */
	if (o->pid && !o->from && !s.t.exited && gb_trap_free_later(s.entry_trap))
		gb_tracee_detach(&s.t);
	gb_guard_test_point("end-detached");
	gb_trap_free(s.entry_trap);
	s.entry_trap = NULL;
	gb_trace_report(&es, trap_name, eo.jit && s.trap != GB_TRAP_NONE);
	if (s.faults) {
		struct gb_faults_stats fs;
		gb_faults__stop(s.faults);
		gb_faults__stats(s.faults, &fs);
		if (fs.lost)
			gb_warn("--faults: %llu page faults lost (ring buffer full); the fault lines "
				"are incomplete", (unsigned long long)fs.lost);
	}
	int werr = gb_jsonl__finish(s.out);
	if (werr && why != GB_END_OUTPUT)
		why = GB_END_OUTPUT;
	struct gb_jsonl_counts c;
	gb_jsonl__counts(s.out, &c);
	/* The recording names the range as the trace ended with it. */
	jo.has_start = s.live.has_start;
	jo.has_end = s.live.has_end;
	jo.start = s.live.start;
	jo.end = s.live.end;
	if (s.rec) {
		struct gb_recording_meta m = {
			.argv = o->argv, .pid = s.t.pid, .end_reason = gb_end_name(why),
			.exit_status = s.t.exited ? s.t.exit_status : -1,
			.trace = &jo, .counts = &c, .max_events = o->max_events,
		};
		int e = gb_recording__finish(s.rec, &m);
		if (e && why != GB_END_OUTPUT) {
			gb_err("%s: cannot finish the recording: %s", o->out_dir, strerror(-e));
			why = GB_END_ERROR;
		}
	}
	rc = report_end(&s, why, &c);
	/* The target: attached -> detached, running as found.  Launched -> it
	 * ends with gebpf on Ctrl-C/SIGTERM (as under a shell's job control),
	 * else (--duration, --max-insns) it is detached and runs on. */
	if ((o->argv || o->from) && !s.t.exited && why == GB_END_SIGNAL)
		gb_tracee_kill(&s.t);
	else if (!s.t.exited)
		gb_tracee_detach(&s.t);
	s.have_target = false;

cleanup:
	gb_xol_release(s.xol, false);
	if (s.have_target) {
		if (o->argv || o->from)
			gb_tracee_kill(&s.t);
		else
			gb_tracee_detach(&s.t);
	}
	gb_tracee_free(&s.t);
	gb_entries_forget();
	gb_faults__free(s.faults);
	gb_engine__free(s.eng);
	gb_trap_free(s.entry_trap);
	gb_probes__free(s.probes);
	gb_probetrap__unprepare(); /* (one not taken) */
	gb_jsonl__free(s.out);
	gb_recording__free(s.rec); /* removes the temporary trace if not finished */
	gb_output_close(&s.file, !s.eng); /* nothing was traced: leave nothing behind */
	return rc;
}
