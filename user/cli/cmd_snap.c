/* gebpf snap: a deterministic snapshot as an ELF core + JSON note.
 * argv -> opts -> ptrace room (launch/attach, run-to) -> snap room. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cmds.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/sigflag.h"
#include "ptrace/runto.h"
#include "ptrace/tracee.h"
#include "snap/point.h"
#include "snap/snapshot.h"
#include "sym/syms.h"

struct snap_opts {
	pid_t pid;
	char **argv;              /* launch mode */
	const char *at, *out;
	uint64_t after;
	bool has_after, aslr, pidns, fix_random, kill_after;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gebpf snap (-p PID | [--aslr] [--no-pidns] [--keep-random] [--kill] -- CMD [ARG...])\n"
		"                  [--at ADDR|SYMBOL|MODULE:SYMBOL | --after N] [-o FILE]\n"
		"Stop every thread, write a snapshot (ELF core + GEBPF JSON note, mode 0600),\n"
		"and resume the threads exactly as they were.\n"
		"  -p PID          attach to a running process\n"
		"  -- CMD          launch CMD (deterministic: ASLR off, own pid namespace,\n"
		"                  fixed AT_RANDOM bytes, pinned to one CPU); it then runs on\n"
		"                  to its end (or is killed with --kill)\n"
		"  --at X          run the first thread to address/symbol X, then snapshot\n"
		"  --after N       single-step the first thread N instructions, then snapshot\n"
		"  -o FILE         output (default snap-PID.core, or snap-CMD.core)\n"
		"  --aslr          keep ASLR on in launch mode\n"
		"  --no-pidns      launch in gebpf's pid namespace (real pids, not deterministic)\n"
		"  --keep-random   keep the kernel's AT_RANDOM bytes (stack canary) in launch mode\n"
		"See docs/snap.md and docs/snapshot-format.md.\n");
}

static int parse(int argc, char **argv, struct snap_opts *o)
{
	enum { O_AT = 256, O_AFTER, O_ASLR, O_NOPIDNS, O_KEEPRAND, O_KILL };
	static const struct option lo[] = {
		{ "pid", required_argument, NULL, 'p' }, { "output", required_argument, NULL, 'o' },
		{ "at", required_argument, NULL, O_AT }, { "after", required_argument, NULL, O_AFTER },
		{ "aslr", no_argument, NULL, O_ASLR }, { "no-pidns", no_argument, NULL, O_NOPIDNS },
		{ "keep-random", no_argument, NULL, O_KEEPRAND }, { "kill", no_argument, NULL, O_KILL },
		{ "help", no_argument, NULL, 'h' }, { 0 } };
	uint64_t v;
	int c;
	memset(o, 0, sizeof(*o));
	o->pidns = o->fix_random = true;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+p:o:h", lo, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (gb_parse_u64(optarg, &v) || v == 0 || v > 0x7fffffff) {
				gb_err("snap: -p expects a process id, got '%s'", optarg);
				return -1;
			}
			o->pid = (pid_t)v;
			break;
		case 'o': o->out = optarg; break;
		case O_AT: o->at = optarg; break;
		case O_AFTER:
			if (gb_parse_u64(optarg, &o->after)) {
				gb_err("snap: --after expects a number of instructions, got '%s'", optarg);
				return -1;
			}
			o->has_after = true;
			break;
		case O_ASLR: o->aslr = true; break;
		case O_NOPIDNS: o->pidns = false; break;
		case O_KEEPRAND: o->fix_random = false; break;
		case O_KILL: o->kill_after = true; break;
		case 'h': usage(stdout); return 1;
		default:
			gb_err("snap: unknown or incomplete option '%s' (see gebpf snap --help)", argv[optind - 1]);
			return -1;
		}
	}
	if (optind < argc)
		o->argv = argv + optind;
	if (!!o->pid == !!o->argv) {
		gb_err("snap: give either -p PID or -- CMD [ARG...] (see gebpf snap --help)");
		return -1;
	}
	if (o->at && o->has_after) {
		gb_err("snap: --at and --after cannot be combined");
		return -1;
	}
	return 0;
}

/* Pin ourselves (and so the child) to the lowest CPU we may use: the kernel
 * writes the CPU number into the program's rseq area. */
static void pin_lowest_cpu(void)
{
	cpu_set_t set, one;
	if (sched_getaffinity(0, sizeof(set), &set))
		return;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set)) {
			CPU_ZERO(&one);
			CPU_SET(c, &one);
			sched_setaffinity(0, sizeof(one), &one);
			return;
		}
}

/* A new pid namespace for our next children: its init (pid 1) just waits,
 * so the launched program is pid 2 every time. */
static pid_t start_pidns(void)
{
	if (unshare(CLONE_NEWPID)) {
		gb_warn("snap: cannot create a pid namespace (%s): pids will not be deterministic",
			strerror(errno));
		return 0;
	}
	pid_t init = fork();
	if (init < 0) {
		gb_warn("snap: fork of the namespace's init failed: %s", strerror(errno));
		return 0;
	}
	if (init == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;)
			pause();
	}
	return init;
}

/* "0x..." is an address; anything else a symbol ([MODULE:]NAME), or an
 * address in bare hex when no symbol has that name. */
static int resolve_at(pid_t pid, const char *at, uint64_t *addr, char *point, size_t plen)
{
	char err[256], module[256] = "";
	const char *name = at, *colon = strrchr(at, ':');
	uint64_t end;
	if (!strncmp(at, "0x", 2) || !strncmp(at, "0X", 2)) {
		if (gb_parse_hex(at, addr)) {
			gb_err("snap: --at %s: not a hex address", at);
			return -1;
		}
		snprintf(point, plen, "at 0x%" PRIx64, *addr);
		return 0;
	}
	if (colon) {
		snprintf(module, sizeof(module), "%.*s", (int)(colon - at), at);
		name = colon + 1;
	}
	if (gb_sym_resolve(pid, module, name, addr, &end, err, sizeof(err))) {
		if (!colon && gb_parse_hex(at, addr) == 0) {
			snprintf(point, plen, "at 0x%" PRIx64, *addr);
			return 0;
		}
		gb_err("snap: --at %s: pid %d: %s", at, pid, err);
		return -1;
	}
	snprintf(point, plen, "at 0x%" PRIx64 " (%s)", *addr, at);
	return 0;
}

static void default_out(const struct snap_opts *o, char *buf, size_t len)
{
	if (o->pid) {
		snprintf(buf, len, "snap-%d.core", o->pid);
	} else {
		const char *b = strrchr(o->argv[0], '/');
		snprintf(buf, len, "snap-%s.core", b ? b + 1 : o->argv[0]);
	}
}

int cmd_snap(int argc, char **argv)
{
	struct snap_opts o;
	struct gb_tracee t;
	struct gb_snapshot *s = NULL;
	char err[512], point[320] = "attach", outbuf[300];
	pid_t init = 0;
	int ret = GB_EXIT_FAIL, r;
	bool have_tracee = false;
	struct gb_snap_rng rng, *det = NULL;

	r = parse(argc, argv, &o);
	if (r)
		return r > 0 ? GB_EXIT_OK : GB_EXIT_USAGE;
	if (!o.out) {
		default_out(&o, outbuf, sizeof(outbuf));
		o.out = outbuf;
	}
	gb_sigflag_install();
	if (o.argv) {
		pin_lowest_cpu();
		if (o.pidns)
			init = start_pidns();
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
		if (gb_tracee_attach(o.pid, &t))
			return GB_EXIT_FAIL;
		have_tracee = true;
	}

	pid_t tid = t.threads[0].tid;
	if (o.at) {
		uint64_t addr;
		if (resolve_at(t.pid, o.at, &addr, point, sizeof(point)))
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
	r = gb_snapshot_capture(&t, &pt, &s, err, sizeof(err));
	if (r) {
		gb_err("snap: %s", err);
		goto cleanup;
	}
	r = gb_snapshot_save(s, o.out, err, sizeof(err));
	if (r) {
		gb_err("snap: %s", err);
		goto cleanup;
	}
	printf("%s\n", o.out);
	fflush(stdout);
	ret = GB_EXIT_OK;
cleanup:
	gb_snapshot_free(s);
	if (have_tracee) {
		if (o.argv && (ret != GB_EXIT_OK || o.kill_after || gb_sigflag_stop())) {
			gb_tracee_kill(&t);
		} else {
			pid_t pid = t.pid;
			bool launched = t.launched && !t.exited;
			gb_tracee_detach(&t);
			/* A launched program runs on to its end. */
			while (launched && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				if (gb_sigflag_stop())
					kill(pid, SIGKILL);
		}
	}
	if (init > 0) {
		kill(init, SIGKILL);
		waitpid(init, NULL, 0);
	}
	return ret;
}
