/* gebpf sample: range-filtered BPF sampling (and page faults) of a launched
 * or attached process.  Command page: docs/sample.md; programs: docs/bpf.md. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cmds.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/sigflag.h"
#include "probe/features.h"
#include "probe/profile.h"
#include "probe/sample_out.h"
#include "probe/sampler.h"
#include "probe/target.h"
#include "sym/syms.h"

static const char usage_text[] =
"usage: gebpf sample (-p PID | -- CMD [ARG...]) [OPTIONS]\n"
"\n"
"Sample a process with a BPF program on a per-CPU perf event.  Samples of\n"
"other processes and samples outside --range are dropped in the kernel; the\n"
"target is never stopped.  Output: JSONL sample/fault lines and a summary.\n"
"\n"
"  -p, --pid PID        sample a running process (all of its threads)\n"
"  -- CMD [ARG...]      launch CMD and sample it (ASLR off unless --aslr)\n"
"  --range R            keep samples with pc in R: START-END (hex, inclusive),\n"
"                       SYMBOL or MODULE:SYMBOL\n"
"  --start ADDR, --end ADDR\n"
"                       one bound of an address range (hex)\n"
"  -F, --freq HZ        samples per second per CPU (default 999)\n"
"  --duration S         stop after S seconds (default: until the target exits)\n"
"  --event E            perf event: cpu-clock, task-clock, cycles, instructions\n"
"                       (default: cycles with a hardware PMU, else cpu-clock)\n"
"  --faults             also record the process's page faults\n"
"  --report             print a table of the top pcs and functions instead\n"
"  --folded             print folded user stacks (flamegraph.pl input) instead\n"
"  --top N              rows per --report table (default 20)\n"
"  -o, --output FILE    write to FILE instead of stdout\n"
"  --aslr               keep ASLR on for a launched command\n"
"  -v, --verbose        show libbpf and probing messages\n"
"  -h, --help           this text\n"
"\n"
"Stops when the target exits, after --duration, or on Ctrl-C/SIGTERM (a\n"
"launched command is then killed); the summary is always written and the BPF\n"
"programs are always unloaded.  Needs root (CAP_BPF, CAP_PERFMON).\n";

enum mode { MODE_LINES, MODE_REPORT, MODE_FOLDED };

struct sample_opts {
	pid_t pid;
	char **cmd;
	struct gb_range_spec range;
	uint64_t hz;
	double duration;          /* 0: none */
	const char *event;
	bool faults, aslr;
	enum mode mode;
	uint64_t top;
	const char *out;
};

enum { OPT_RANGE = 256, OPT_START, OPT_END, OPT_DURATION, OPT_EVENT, OPT_FAULTS, OPT_REPORT,
       OPT_FOLDED, OPT_TOP, OPT_ASLR };

static int parse(int argc, char **argv, struct sample_opts *o)
{
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "range", required_argument, NULL, OPT_RANGE },
		{ "start", required_argument, NULL, OPT_START },
		{ "end", required_argument, NULL, OPT_END },
		{ "freq", required_argument, NULL, 'F' },
		{ "duration", required_argument, NULL, OPT_DURATION },
		{ "event", required_argument, NULL, OPT_EVENT },
		{ "faults", no_argument, NULL, OPT_FAULTS },
		{ "report", no_argument, NULL, OPT_REPORT },
		{ "folded", no_argument, NULL, OPT_FOLDED },
		{ "top", required_argument, NULL, OPT_TOP },
		{ "output", required_argument, NULL, 'o' },
		{ "aslr", no_argument, NULL, OPT_ASLR },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t v;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+p:F:o:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (gb_parse_u64(optarg, &v) || v == 0 || v > INT32_MAX) {
				gb_err("sample: -p %s: not a process id", optarg);
				return -1;
			}
			o->pid = (pid_t)v;
			break;
		case OPT_RANGE:
			if (gb_range_parse("sample", optarg, &o->range))
				return -1;
			break;
		case OPT_START:
		case OPT_END:
			if (gb_range_set_bound("sample", &o->range, c == OPT_END, optarg))
				return -1;
			break;
		case 'F':
			if (gb_parse_u64(optarg, &o->hz) || o->hz == 0) {
				gb_err("sample: -F %s: expected a positive rate in Hz", optarg);
				return -1;
			}
			break;
		case OPT_DURATION:
			if (gb_parse_seconds(optarg, &o->duration) || o->duration <= 0) {
				gb_err("sample: --duration %s: expected positive seconds", optarg);
				return -1;
			}
			break;
		case OPT_EVENT:
			if (!gb_perf_event_find(optarg)) {
				gb_err("sample: --event %s: unknown event (known: %s)", optarg,
				       gb_perf_event_names());
				return -1;
			}
			o->event = optarg;
			break;
		case OPT_FAULTS: o->faults = true; break;
		case OPT_REPORT: o->mode = MODE_REPORT; break;
		case OPT_FOLDED: o->mode = MODE_FOLDED; break;
		case OPT_TOP:
			if (gb_parse_u64(optarg, &o->top) || !o->top) {
				gb_err("sample: --top %s: expected a positive count", optarg);
				return -1;
			}
			break;
		case 'o': o->out = optarg; break;
		case OPT_ASLR: o->aslr = true; break;
		case 'v': gb_log_set_verbose(true); break;
		case 'h': fputs(usage_text, stdout); return 1;
		default:
			gb_err("sample: %s: unknown or incomplete option (try 'gebpf sample --help')",
			       argv[optind - 1]);
			return -1;
		}
	}
	if (optind < argc)
		o->cmd = argv + optind;
	if (!!o->pid == !!o->cmd) {
		gb_err("sample: give exactly one of -p PID or -- CMD (try 'gebpf sample --help')");
		return -1;
	}
	return 0;
}

struct sink {
	FILE *f;
	enum mode mode;
	struct gb_profile *prof;
};

static int on_sample(void *ctx, const struct gb_sample *s)
{
	struct sink *k = ctx;
	if (k->mode == MODE_LINES) {
		gb_sample_out_sample(k->f, s);
		return 0;
	}
	return gb_profile__add(k->prof, s);
}

static int on_fault(void *ctx, const struct gb_fault *x)
{
	struct sink *k = ctx;
	if (k->mode == MODE_LINES)
		gb_sample_out_fault(k->f, x);
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A SYMBOL range.  A launched command's executable is mapped at exec, but
 * a MODULE:SYMBOL in a shared library only once ld.so maps it: retry that
 * for up to a second while the command runs. */
static int resolve_range(const struct sample_opts *o, pid_t pid, struct gb_target *t,
			 uint64_t *start, uint64_t *end)
{
	char err[256] = "", first[256] = "";
	double give_up = now_s() + 1.0;
	bool retry = gb_target__launched(t) && o->range.module[0];

	while (gb_sym_resolve(pid, o->range.module, o->range.symbol, start, end, err, sizeof(err))) {
		if (!first[0])
			snprintf(first, sizeof(first), "%s", err);  /* not "process gone" */
		if (!retry || now_s() > give_up || gb_target__exited(t)) {
			gb_err("sample: --range %s%s%s: pid %d: %s", o->range.module,
			       o->range.module[0] ? ":" : "", o->range.symbol, pid, first);
			return -ENOENT;
		}
		usleep(2000);
	}
	return 0;
}

int cmd_sample(int argc, char **argv)
{
	struct sample_opts o = { .hz = 999 };
	struct gb_sampler_opts so = { 0 };
	struct gb_sampler *smp = NULL;
	struct gb_target *t = NULL;
	struct sink k = { 0 };
	struct gb_sample_summary sum = { 0 };
	int ret = GB_EXIT_FAIL, err;
	FILE *out = NULL;

	err = parse(argc, argv, &o);
	if (err)
		return err > 0 ? GB_EXIT_OK : GB_EXIT_USAGE;
	gb_sigflag_install();

	out = o.out ? fopen(o.out, "w") : stdout;
	if (!out) {
		gb_err("sample: %s: %s", o.out, strerror(errno));
		return GB_EXIT_FAIL;
	}
	t = o.cmd ? gb_target__launch(o.cmd, o.aslr) : gb_target__attach(o.pid);
	if (!t)
		goto cleanup;

	so.tgid = gb_target__pid(t);
	so.event = o.event;
	so.hz = o.hz;
	so.stacks = o.mode == MODE_FOLDED;
	so.faults = o.faults;
	so.wait_exec = o.cmd != NULL;
	so.has_range = o.range.kind != GB_RANGE_NONE;
	if (o.range.kind == GB_RANGE_ADDR) {
		so.start = o.range.has_start ? o.range.start : 0;
		so.end = o.range.has_end ? o.range.end : UINT64_MAX;
	} else if (o.range.kind == GB_RANGE_SYM) {
		/* Empty until resolved (a launched command has not run yet). */
		so.start = UINT64_MAX;
		so.end = 0;
		if (!o.cmd && resolve_range(&o, so.tgid, t, &so.start, &so.end))
			goto cleanup;
	}
	smp = gb_sampler__new(&so);
	if (!smp || gb_sampler__start(smp))
		goto cleanup;
	if (gb_target__release(t))
		goto cleanup;
	gb_sampler__arm(smp);
	if (o.range.kind == GB_RANGE_SYM && o.cmd) {
		if (resolve_range(&o, so.tgid, t, &so.start, &so.end))
			goto cleanup;
		gb_sampler__set_range(smp, so.start, so.end);
	}
	gb_info("sample: pid %d, %s at %" PRIu64 " Hz%s", so.tgid, gb_sampler__event(smp),
		gb_sampler__hz(smp), o.faults ? ", page faults" : "");

	k.f = out;
	k.mode = o.mode;
	if (o.mode != MODE_LINES && !(k.prof = gb_profile__new(so.tgid))) {
		gb_err("sample: %s", strerror(ENOMEM));
		goto cleanup;
	}
	struct gb_sampler_cbs cbs = { .sample = on_sample, .fault = on_fault, .ctx = &k };
	double deadline = o.duration > 0 ? now_s() + o.duration : 0;
	struct pollfd pfd[2] = {
		{ .fd = gb_sampler__fd(smp), .events = POLLIN },
		{ .fd = gb_target__fd(t), .events = POLLIN },
	};
	while (!gb_sigflag_stop()) {
		int timeout = 100;
		if (deadline) {
			double left = deadline - now_s();
			if (left <= 0)
				break;
			if (left * 1000 < timeout)
				timeout = (int)(left * 1000) + 1;
		}
		if (poll(pfd, pfd[1].fd >= 0 ? 2 : 1, timeout) < 0 && errno != EINTR) {
			gb_err("sample: poll: %s", strerror(errno));
			goto cleanup;
		}
		err = gb_sampler__drain(smp, &cbs);
		if (err < 0) {
			gb_err("sample: reading samples: %s", strerror(-err));
			goto cleanup;
		}
		if (gb_target__exited(t))
			break;
	}
	/* Detach first, then read what is left: nothing arrives after this. */
	gb_sampler__stop(smp);
	err = gb_sampler__drain(smp, &cbs);
	if (err < 0) {
		gb_err("sample: reading samples: %s", strerror(-err));
		goto cleanup;
	}

	gb_sampler__stats(smp, &sum.st);
	sum.event = gb_sampler__event(smp);
	sum.hz = gb_sampler__hz(smp);
	sum.has_range = so.has_range;
	sum.start = so.start;
	sum.end = so.end;
	sum.faults = o.faults;
	if (o.mode == MODE_LINES) {
		gb_sample_out_summary(out, &sum);
	} else if (o.mode == MODE_REPORT) {
		char hdr[512];
		snprintf(hdr, sizeof(hdr), "gebpf sample: pid %d, %s at %" PRIu64 " Hz: %" PRIu64
			 " kept, %" PRIu64 " seen, %" PRIu64 " filtered in the kernel, %" PRIu64 " lost",
			 so.tgid, sum.event, sum.hz, sum.st.kept, sum.st.seen,
			 sum.st.other + sum.st.out_of_range, sum.st.lost);
		gb_profile__report(k.prof, out, o.top, hdr);
	} else {
		gb_profile__folded(k.prof, out);
	}
	if (sum.st.lost || sum.st.faults_lost)
		gb_warn("sample: pid %d: %" PRIu64 " samples and %" PRIu64
			" faults lost (ring buffer full)", so.tgid, sum.st.lost, sum.st.faults_lost);
	if (fflush(out) || ferror(out)) {
		gb_err("sample: %s: write: %s", o.out ? o.out : "stdout", strerror(errno));
		goto cleanup;
	}
	ret = GB_EXIT_OK;
cleanup:
	gb_sampler__free(smp);   /* unloads every program, on every path */
	gb_target__free(t);      /* kills a launched command still running */
	gb_profile__free(k.prof);
	if (out && out != stdout && fclose(out) && ret == GB_EXIT_OK) {
		gb_err("sample: %s: %s", o.out, strerror(errno));
		ret = GB_EXIT_FAIL;
	}
	return ret;
}
