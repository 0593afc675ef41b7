/* gebpf snap: argv -> struct gb_snap_opts -> gb_snap_session_run()
 * (snap/session.h; docs/snap.md). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cmds.h"
#include "common/log.h"
#include "common/parse.h"
#include "snap/session.h"
#include "sym/syms.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gebpf snap (-p PID | [--aslr] [--no-pidns] [--keep-random] [--kill] -- CMD [ARG...])\n"
		"                  [--at ADDR|SYMBOL|MODULE:SYMBOL | --after N] [-o FILE] [--no-fork] [-v]\n"
		"Stop every thread, write a snapshot (ELF core + GEBPF JSON note, mode 0600),\n"
		"and resume the threads exactly as they were.  The threads are stopped only\n"
		"while a copy-on-write copy of the memory is made; the bytes are read from it.\n"
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
		"  --no-fork       no copy: keep the process stopped while its memory is read\n"
		"  -v, --verbose   report the phases (freeze, copy, sync) on stderr\n"
		"See docs/snap.md and docs/snapshot-format.md.\n");
}

/* --at: "0x..." is an address; anything else a symbol ([MODULE:]NAME). */
static int parse_at(const char *at, struct gb_range_spec *spec)
{
	if (strncmp(at, "0x", 2) && strncmp(at, "0X", 2))
		return gb_sym_spec_parse("snap", "--at", at, spec);
	memset(spec, 0, sizeof(*spec));
	if (gb_parse_hex(at, &spec->start)) {
		gb_err("snap: --at %s: not a hex address", at);
		return -EINVAL;
	}
	spec->kind = GB_RANGE_ADDR;
	spec->has_start = spec->has_end = true;
	spec->end = spec->start;
	return 0;
}

static int parse(int argc, char **argv, struct gb_snap_opts *o)
{
	enum { O_AT = 256, O_AFTER, O_ASLR, O_NOPIDNS, O_KEEPRAND, O_KILL, O_NOFORK };
	static const struct option lo[] = {
		{ "pid", required_argument, NULL, 'p' }, { "output", required_argument, NULL, 'o' },
		{ "at", required_argument, NULL, O_AT }, { "after", required_argument, NULL, O_AFTER },
		{ "aslr", no_argument, NULL, O_ASLR }, { "no-pidns", no_argument, NULL, O_NOPIDNS },
		{ "keep-random", no_argument, NULL, O_KEEPRAND }, { "kill", no_argument, NULL, O_KILL },
		{ "no-fork", no_argument, NULL, O_NOFORK }, { "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' }, { 0 } };
	uint64_t v;
	int c;
	memset(o, 0, sizeof(*o));
	o->pidns = o->fix_random = true;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+p:o:vh", lo, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (gb_parse_u64(optarg, &v) || v == 0 || v > 0x7fffffff) {
				gb_err("snap: -p expects a process id, got '%s'", optarg);
				return -1;
			}
			o->pid = (pid_t)v;
			break;
		case 'o': o->out = optarg; break;
		case O_AT:
			o->at = optarg;
			if (parse_at(optarg, &o->at_spec))
				return -1;
			break;
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
		case O_NOFORK: o->no_fork = true; break;
		case 'v': o->verbose = true; break;
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

int cmd_snap(int argc, char **argv)
{
	struct gb_snap_opts o;
	int r = parse(argc, argv, &o);
	if (r)
		return r > 0 ? GB_EXIT_OK : GB_EXIT_USAGE;
	return gb_snap_session_run(&o);
}
