/* gebpf trace: argv -> struct gb_trace_opts -> gb_trace_session_run(). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cmds.h"
#include "common/guard.h"
#include "common/log.h"
#include "common/parse.h"
#include "record/jsonl.h"
#include "session/session.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: gebpf trace (-p PID | --from SNAP | -- CMD [ARG...]) [options]\n"
"\n"
"Exact trace of the instructions and memory accesses in a range, one JSONL line\n"
"each (docs/trace-format.md).  Needs root or CAP_SYS_PTRACE.\n"
"\n"
"  -p, --pid PID          attach to a running process and all of its threads\n"
"  -- CMD [ARG...]        launch CMD under the tracer (ASLR off unless --aslr)\n"
"      --from SNAP        resume snapshot SNAP (docs/resume.md) and trace it from\n"
"                         its next instruction; vt continues from the snapshot's\n"
"  -r, --range R          START-END (hex, inclusive), SYMBOL or MODULE:SYMBOL\n"
"      --start ADDR       lower bound (hex); --end ADDR: upper bound (inclusive)\n"
"      --exec on|off      exec lines (default on); memory lines are always written\n"
"      --max-events N     lines written at most (default 1000000, 0 = unlimited);\n"
"                         further lines are counted as dropped (said once on\n"
"                         stderr when it happens)\n"
"      --max-insns N      stop after N in-range instructions\n"
"      --duration S       stop after S seconds\n"
"  -o, --output FILE      write the trace to FILE (default: stdout); a FILE\n"
"                         ending in .zst is written zstd-compressed\n"
"      --out DIR          recording directory: DIR/meta.json,\n"
"                         DIR/blobs/trace.jsonl.zst (zstd)\n"
"      --compress zstd|none  zstd frames with a seek table (zstdcat reads\n"
"                         them), or plain lines, whatever -o or --out says\n"
"                         (default: zstd for --out and -o FILE.zst)\n"
"      --force            with --out: replace an earlier recording in DIR\n"
"      --snap-at pc=ADDR|vt=N  snapshot into DIR/blobs/snap-<vt>.core (repeatable;\n"
"                         needs --out)\n"
"      --faults           merge page faults (BPF) as fault lines\n"
"      --values           each access line gains its value (\"val\"), each exec\n"
"                         line the registers it wrote (\"regs\"), and a regs\n"
"                         line gives a thread's whole register file where its\n"
"                         stretch starts (docs/trace-format.md \"Values\");\n"
"                         the translating engine takes them in its code\n"
"                         cache (an instruction it cannot is stepped),\n"
"                         entered through the probe trap where every entry\n"
"                         can give its values once it ran, else the page\n"
"                         trap (or --trap none)\n"
"      --trap patch|probes|pages|none  how a natively running thread enters the\n"
"                         range (docs/trace.md \"Entry traps\"): patch (entries\n"
"                         patched into jumps to translated code, no stop; the\n"
"                         default where it applies: code of one file, without\n"
"                         --engine step, --snap-at or --faults; asked for\n"
"                         where it does not apply: probes, with a warning),\n"
"                         probes (uprobes + BPF at each entry address; the\n"
"                         default where patch is not used), pages (PROT_EXEC\n"
"                         removed from the range's pages; the default for\n"
"                         anonymous code, for an entry uprobes cannot take,\n"
"                         and with --snap-at vt=N), none (single-step\n"
"                         everything; also without a bounded range); the\n"
"                         trace is the same\n"
"      --step-all         the same as --trap none\n"
"      --engine jit|step  what runs the range (docs/trace.md \"Engines\"): jit\n"
"                         (the range's code translated in a code cache in the\n"
"                         target: the patch trap's, or between entries of the\n"
"                         probe or page trap; the default) or step\n"
"                         (single-step each instruction); the trace is the same\n"
"      --aslr             keep ASLR on in launch mode\n"
"      --no-pin           do not pin tracer and target to one CPU while stepping\n"
"  -v, --verbose          diagnostics on stderr, ending with the counters of\n"
"                         what ran (docs/trace.md \"What -v says\")\n"
"      --debug            -v, and libbpf's own debug lines (its loading and\n"
"                         attaching of the BPF programs)\n"
"  -h, --help             this text\n"
"\n"
"The trace ends when the launched command exits, after --duration or --max-insns,\n"
"or on Ctrl-C/SIGTERM; the summary line is always written.  An attached target is\n"
"left running as it was found (or stopped, if Ctrl-Z or SIGSTOP had stopped it or\n"
"stops it: docs/trace.md \"A stopped process\"), also when gebpf is SIGKILLed: the\n"
"tracing is done by a worker process that then ends the trace as SIGTERM does\n"
"(docs/trace.md \"Ending\").  Launch mode kills the target when the trace is\n"
"interrupted.\n");
}

enum { O_START = 256, O_END, O_EXEC, O_MAX_EVENTS, O_MAX_INSNS, O_DURATION, O_OUT, O_SNAP_AT,
       O_FAULTS, O_STEP_ALL, O_TRAP, O_ASLR, O_NO_PIN, O_FROM, O_FORCE, O_ENGINE, O_COMPRESS,
       O_DEBUG, O_VALUES };

static const struct option longopts[] = {
	{ "pid", required_argument, NULL, 'p' },
	{ "range", required_argument, NULL, 'r' },
	{ "start", required_argument, NULL, O_START },
	{ "end", required_argument, NULL, O_END },
	{ "exec", required_argument, NULL, O_EXEC },
	{ "max-events", required_argument, NULL, O_MAX_EVENTS },
	{ "max-insns", required_argument, NULL, O_MAX_INSNS },
	{ "duration", required_argument, NULL, O_DURATION },
	{ "output", required_argument, NULL, 'o' },
	{ "out", required_argument, NULL, O_OUT },
	{ "snap-at", required_argument, NULL, O_SNAP_AT },
	{ "faults", no_argument, NULL, O_FAULTS },
	{ "values", no_argument, NULL, O_VALUES },
	{ "step-all", no_argument, NULL, O_STEP_ALL },
	{ "trap", required_argument, NULL, O_TRAP },
	{ "engine", required_argument, NULL, O_ENGINE },
	{ "aslr", no_argument, NULL, O_ASLR },
	{ "no-pin", no_argument, NULL, O_NO_PIN },
	{ "from", required_argument, NULL, O_FROM },
	{ "force", no_argument, NULL, O_FORCE },
	{ "compress", required_argument, NULL, O_COMPRESS },
	{ "verbose", no_argument, NULL, 'v' },
	{ "debug", no_argument, NULL, O_DEBUG },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

static int bad(const char *what, const char *why)
{
	gb_err("trace: %s: %s", what, why);
	return GB_EXIT_USAGE;
}

static int parse_snap_at(struct gb_trace_opts *o, const char *s)
{
	uint64_t v;
	if (!strncmp(s, "pc=", 3) && gb_parse_hex(s + 3, &v) == 0) {
		if (o->nsnap_pcs == GB_MAX_SNAP_POINTS)
			return -1;
		o->snap_pcs[o->nsnap_pcs++] = v;
		return 0;
	}
	if (!strncmp(s, "vt=", 3) && gb_parse_u64(s + 3, &v) == 0) {
		if (o->nsnap_vts == GB_MAX_SNAP_POINTS)
			return -1;
		o->snap_vts[o->nsnap_vts++] = v;
		return 0;
	}
	return -1;
}

int cmd_trace(int argc, char **argv)
{
	struct gb_trace_opts o;
	const char *range_arg = NULL, *start_arg = NULL, *end_arg = NULL;
	int compress = -1; /* --compress: 1 zstd, 0 none, -1 by the output's name */
	memset(&o, 0, sizeof(o));
	o.exec = true;
	o.max_events = GB_DEFAULT_MAX_EVENTS;
	o.pin = true;

	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+p:r:o:vh", longopts, NULL)) != -1) {
		uint64_t v;
		switch (c) {
		case 'p':
			if (gb_parse_u64(optarg, &v) || v == 0 || v > 0x7fffffff)
				return bad(optarg, "not a valid pid");
			o.pid = (pid_t)v;
			break;
		case 'r': range_arg = optarg; break;
		case O_START: start_arg = optarg; break;
		case O_END: end_arg = optarg; break;
		case O_EXEC:
			if (!strcmp(optarg, "on"))
				o.exec = true;
			else if (!strcmp(optarg, "off"))
				o.exec = false;
			else
				return bad("--exec", "expected on or off");
			break;
		case O_MAX_EVENTS:
			if (gb_parse_count_opt("trace", "--max-events", optarg, false, &o.max_events))
				return GB_EXIT_USAGE;
			break;
		case O_MAX_INSNS:
			if (gb_parse_count_opt("trace", "--max-insns", optarg, true, &o.max_insns))
				return GB_EXIT_USAGE;
			break;
		case O_DURATION:
			if (gb_parse_duration_opt("trace", "--duration", optarg, &o.duration))
				return GB_EXIT_USAGE;
			break;
		case 'o': o.out_file = optarg; break;
		case O_OUT: o.out_dir = optarg; break;
		case O_SNAP_AT:
			if (parse_snap_at(&o, optarg))
				return bad(optarg, "expected --snap-at pc=HEXADDR or vt=N (at most 64)");
			break;
		case O_FAULTS: o.faults = true; break;
		case O_VALUES: o.values = true; break;
		case O_STEP_ALL: o.trap = GB_TRAP_NONE; break;
		case O_TRAP:
			if (!strcmp(optarg, "probes"))
				o.trap = GB_TRAP_PROBES;
			else if (!strcmp(optarg, "pages"))
				o.trap = GB_TRAP_PAGES;
			else if (!strcmp(optarg, "none"))
				o.trap = GB_TRAP_NONE;
			else if (!strcmp(optarg, "patch"))
				o.trap = GB_TRAP_PATCH;
			else
				return bad("--trap", "expected patch, probes, pages or none");
			break;
		case O_ENGINE:
			if (!strcmp(optarg, "step"))
				o.engine = GB_ENGINE_STEP;
			else if (!strcmp(optarg, "jit"))
				o.engine = GB_ENGINE_JIT;
			else
				return bad("--engine", "expected step or jit");
			break;
		case O_ASLR: o.aslr = true; break;
		case O_NO_PIN: o.pin = false; break;
		case O_FROM: o.from = optarg; break;
		case O_FORCE: o.force = true; break;
		case O_COMPRESS:
			if (!strcmp(optarg, "zstd"))
				compress = 1;
			else if (!strcmp(optarg, "none"))
				compress = 0;
			else
				return bad("--compress", "expected zstd or none");
			break;
		case 'v': gb_log_set_verbose(true); break;
		case O_DEBUG: gb_log_set_debug(true); break;
		case 'h': usage(stdout); return GB_EXIT_OK;
		default: return cli_bad_option("trace", argv, "+p:r:o:vh");
		}
	}
	if (optind < argc)
		o.argv = &argv[optind];
	if ((o.pid != 0) + (o.argv != NULL) + (o.from != NULL) != 1)
		return bad("target", o.pid || o.argv || o.from ? "give one of -p PID, --from SNAP, -- CMD"
					   : "give -p PID, --from SNAP or -- CMD (see gebpf trace --help)");
	if (o.out_file && o.out_dir)
		return bad("output", "give -o FILE or --out DIR, not both");
	if (compress < 0) {
		size_t n = o.out_file ? strlen(o.out_file) : 0;
		compress = o.out_dir || (n > 4 && !strcmp(o.out_file + n - 4, ".zst"));
	}
	o.zstd = compress == 1;
	if ((o.nsnap_pcs || o.nsnap_vts) && !o.out_dir)
		return bad("--snap-at", "needs --out DIR (snapshots go to DIR/blobs/)");
	if (o.values && o.trap == GB_TRAP_PATCH)
		return bad("--values", "the patch trap's code cache (the one without stops) does not "
			   "take values yet: use --trap probes, pages or none (the default with "
			   "--values: probes where every entry can give its values, else pages)");
	if ((range_arg && gb_range_parse("trace", range_arg, &o.range)) ||
	    (start_arg && gb_range_set_bound("trace", &o.range, false, start_arg)) ||
	    (end_arg && gb_range_set_bound("trace", &o.range, true, end_arg)))
		return GB_EXIT_USAGE;
	/* A SIGKILL of this process must not leave a stepped thread with its
	 * trap flag set (common/guard.h). */
	gb_guard();
	return gb_trace_session_run(&o);
}
