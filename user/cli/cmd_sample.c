/* gebpf sample: argv -> struct gb_sample_session_opts -> the sampling run
 * (user/sample/session.c).  Command page: docs/sample.md. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cmds.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/sigflag.h"
#include "probe/features.h"
#include "sample/opts.h"
#include "sample/session.h"

static const char usage_text[] =
"usage: gebpf sample (-p PID[,PID...] | -a | --cgroup DIR | -- CMD [ARG...]) [OPTIONS]\n"
"\n"
"Sample processes with a BPF program on a per-CPU perf event.  Samples out\n"
"of scope and outside --range are dropped in the kernel; the targets are\n"
"never stopped.  Output: JSONL sample/fault lines and a summary, or a\n"
"profile (--report, --folded, --pprof, --flamegraph) with full call stacks;\n"
"with --pprof or --flamegraph alone, -o FILE gets the JSONL lines too.\n"
"\n"
"  -p, --pid PID[,PID]  sample running processes (all threads, and the\n"
"                       processes they fork from now on); may be repeated\n"
"  -- CMD [ARG...]      launch CMD and sample it (ASLR off unless --aslr)\n"
"  -a, --all            sample every process (but gebpf)\n"
"  --cgroup DIR         sample the processes of one cgroup v2 directory\n"
"  --range R            keep samples with pc in R: START-END (hex, inclusive),\n"
"                       SYMBOL or MODULE:SYMBOL (one process only)\n"
"  --start ADDR, --end ADDR\n"
"                       one bound of an address range (hex)\n"
"  -F, --freq HZ        samples per second per CPU (default 999)\n"
"  --duration S         stop after S seconds (default: until the targets exit)\n"
"  --event E            perf event: cpu-clock, task-clock, cycles, instructions\n"
"                       (default: cycles with a hardware PMU, else cpu-clock)\n"
"  --faults             also record page faults (one process, JSONL output)\n"
"  --report             print a table of the top pcs and functions instead\n"
"  --folded             print folded stacks (flamegraph.pl input) instead\n"
"  --pprof FILE         also write a gzipped pprof profile (profile.proto)\n"
"  --flamegraph FILE    also write an interactive SVG flame graph\n"
"  --every T            continuous mode: one pprof profile per period T (as\n"
"                       10s, 1m, 1h or seconds; at least 1s) into --pprof-dir\n"
"  --pprof-dir DIR      where --every writes HOST-YYYYMMDDTHHMMSSZ.pb.gz (UTC\n"
"                       start of the period), each renamed into place whole\n"
"  --keep N             keep at most the N newest profiles of this host in DIR\n"
"  --max-age T          remove this host's profiles older than T from DIR\n"
"  --call-graph M       user stacks for a profile: dwarf (default: registers and\n"
"                       the stack top, unwound with DWARF CFI) or fp (frame\n"
"                       pointers, walked in the kernel)\n"
"  --stack-size N       bytes of user stack copied per sample for dwarf\n"
"                       (default 8192, at most 65536, a multiple of 8)\n"
"  --kernel             kernel stacks too (below the user stack)\n"
"  --no-python          native frames only (default: the Python functions of\n"
"                       CPython 3.11-3.13 processes in place of the interpreter's\n"
"                       _PyEval_EvalFrameDefault frames)\n"
"  --top N              rows per --report table (default 20)\n"
"  -o, --output FILE    write to FILE instead of stdout\n"
"  --aslr               keep ASLR on for a launched command\n"
"  -v, --verbose        diagnostics on stderr (probing, targets, counts)\n"
"  --debug              -v, and libbpf's own debug lines (its loading and\n"
"                       attaching of the BPF programs)\n"
"  -h, --help           this text\n"
"\n"
"Stops when the targets exit (a launched command: when it exits), after\n"
"--duration, or on Ctrl-C/SIGTERM (a launched command is then killed); the\n"
"summary is always written and the BPF programs are always unloaded (with\n"
"--every, the last partial period's profile too).  Needs root (CAP_BPF,\n"
"CAP_PERFMON).\n";

enum { OPT_RANGE = 256, OPT_START, OPT_END, OPT_DURATION, OPT_EVENT, OPT_FAULTS, OPT_REPORT,
       OPT_FOLDED, OPT_TOP, OPT_ASLR, OPT_CGROUP, OPT_PPROF, OPT_FLAME, OPT_CALL_GRAPH, OPT_STACK_SIZE,
       OPT_KERNEL, OPT_NO_PYTHON, OPT_EVERY, OPT_PPROF_DIR, OPT_KEEP, OPT_MAX_AGE, OPT_DEBUG };

/* "1,2,3" appended to o->pids. */
static int parse_pids(const char *arg, struct gb_sample_session_opts *o)
{
	char buf[1024], *save = NULL, *tok;
	uint64_t v;

	snprintf(buf, sizeof(buf), "%s", arg);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (gb_parse_u64(tok, &v) || v == 0 || v > INT32_MAX) {
			gb_err("sample: -p %s: %s: not a process id", arg, tok);
			return -1;
		}
		if (o->npids == GB_SAMPLE_MAX_PIDS) {
			gb_err("sample: -p: at most %d processes", GB_SAMPLE_MAX_PIDS);
			return -1;
		}
		o->pids[o->npids++] = (pid_t)v;
	}
	if (!o->npids) {
		gb_err("sample: -p %s: not a process id", arg);
		return -1;
	}
	return 0;
}

static int parse(int argc, char **argv, struct gb_sample_session_opts *o)
{
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "all", no_argument, NULL, 'a' },
		{ "cgroup", required_argument, NULL, OPT_CGROUP },
		{ "pprof", required_argument, NULL, OPT_PPROF },
		{ "flamegraph", required_argument, NULL, OPT_FLAME },
		{ "every", required_argument, NULL, OPT_EVERY },
		{ "pprof-dir", required_argument, NULL, OPT_PPROF_DIR },
		{ "keep", required_argument, NULL, OPT_KEEP },
		{ "max-age", required_argument, NULL, OPT_MAX_AGE },
		{ "call-graph", required_argument, NULL, OPT_CALL_GRAPH },
		{ "stack-size", required_argument, NULL, OPT_STACK_SIZE },
		{ "kernel", no_argument, NULL, OPT_KERNEL },
		{ "no-python", no_argument, NULL, OPT_NO_PYTHON },
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
		{ "debug", no_argument, NULL, OPT_DEBUG },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	bool report = false, folded = false, call_graph = false;
	uint64_t v;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+p:aF:o:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (parse_pids(optarg, o))
				return -1;
			break;
		case 'a': o->all = true; break;
		case OPT_CGROUP: o->cgroup = optarg; break;
		case OPT_PPROF: o->pprof = optarg; break;
		case OPT_FLAME: o->flame = optarg; break;
		case OPT_EVERY:
			if (gb_parse_period_opt("sample", "--every", optarg, &o->every))
				return -1;
			if (o->every < 1) {
				gb_err("sample: --every %s: at least 1s (profiles are named by the "
				       "second)", optarg);
				return -1;
			}
			break;
		case OPT_PPROF_DIR: o->pprof_dir = optarg; break;
		case OPT_KEEP:
			if (gb_parse_count_opt("sample", "--keep", optarg, true, &o->keep))
				return -1;
			break;
		case OPT_MAX_AGE:
			if (gb_parse_period_opt("sample", "--max-age", optarg, &o->max_age))
				return -1;
			break;
		case OPT_CALL_GRAPH:
			if (!strcmp(optarg, "fp")) {
				o->stacks = GB_STACK_FP;
			} else if (!strcmp(optarg, "dwarf")) {
				o->stacks = GB_STACK_DWARF;
			} else {
				gb_err("sample: --call-graph %s: expected fp or dwarf", optarg);
				return -1;
			}
			call_graph = true;
			break;
		case OPT_STACK_SIZE:
			if (gb_parse_u64(optarg, &v) || !v || v % 8 || v > GB_MAX_STACK_BYTES) {
				gb_err("sample: --stack-size %s: expected a multiple of 8 from 8 to %d",
				       optarg, GB_MAX_STACK_BYTES);
				return -1;
			}
			o->stack_size = (uint32_t)v;
			break;
		case OPT_KERNEL: o->kernel = true; break;
		case OPT_NO_PYTHON: o->no_python = true; break;
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
			if (gb_parse_duration_opt("sample", "--duration", optarg, &o->duration))
				return -1;
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
		case OPT_REPORT: report = true; break;
		case OPT_FOLDED: folded = true; break;
		case OPT_TOP:
			if (gb_parse_u64(optarg, &o->top) || !o->top) {
				gb_err("sample: --top %s: expected a positive count", optarg);
				return -1;
			}
			break;
		case 'o': o->out = optarg; break;
		case OPT_ASLR: o->aslr = true; break;
		case 'v': gb_log_set_verbose(true); break;
		case OPT_DEBUG: gb_log_set_debug(true); break;
		case 'h': fputs(usage_text, stdout); return 1;
		default:
			gb_err("sample: %s: unknown or incomplete option (try 'gebpf sample --help')",
			       argv[optind - 1]);
			return -1;
		}
	}
	if (optind < argc)
		o->cmd = argv + optind;
	return gb_sample_opts_settle(o, report, folded, call_graph);
}

int cmd_sample(int argc, char **argv)
{
	struct gb_sample_session_opts o = { .hz = 999 };
	int err = parse(argc, argv, &o);

	if (err)
		return err > 0 ? GB_EXIT_OK : GB_EXIT_USAGE;
	gb_sigflag_install();
	return gb_sample_session_run(&o);
}
