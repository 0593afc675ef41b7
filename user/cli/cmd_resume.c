/* gebpf resume: argv -> gb_resume_opts -> the resume room (resume/session.c:
 * load, edit, restore, wait), whose exit code is gebpf's. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmds.h"
#include "common/log.h"
#include "resume/resume.h"

#define MAX_EDITS 64

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gebpf resume [--set REG=VALUE]... [--poke ADDR=HEX]... [--fd N=close|PATH]...\n"
		"                    [--new-pidns] SNAP\n"
		"Recreate the process of snapshot SNAP (its maps, registers, brk, auxv, files)\n"
		"and let it run on from the captured point; gebpf waits for it and exits with\n"
		"its exit status (128+N when signal N killed it).  Needs root (prctl PR_SET_MM).\n"
		"  --set REG=VALUE   set a general register first (rax, rip, fs_base, ...;\n"
		"                    VALUE decimal or 0x hex); repeatable\n"
		"  --poke ADDR=HEX   write bytes (hex digits, two per byte) at ADDR first;\n"
		"                    repeatable\n"
		"  --new-pidns       run it in a new pid namespace with its own pid and tids\n"
		"                    (clone3 set_tid), for programs that cached them\n"
		"  --fd N=close|PATH fd N closed, or PATH opened there, instead of what resume\n"
		"                    makes of it (a socket to outside, a device: /dev/null);\n"
		"                    repeatable\n"
		"  -v, --verbose     diagnostics on stderr\n"
		"See docs/resume.md.\n");
}

int cmd_resume(int argc, char **argv)
{
	enum { O_SET = 256, O_POKE, O_PIDNS, O_FD };
	static const struct option lo[] = {
		{ "set", required_argument, NULL, O_SET }, { "poke", required_argument, NULL, O_POKE },
		{ "new-pidns", no_argument, NULL, O_PIDNS }, { "fd", required_argument, NULL, O_FD },
		{ "verbose", no_argument, NULL, 'v' }, { "help", no_argument, NULL, 'h' }, { 0 } };
	const char *sets[MAX_EDITS], *pokes[MAX_EDITS];
	size_t nsets = 0, npokes = 0;
	bool pidns = false;
	struct gb_fd_choice fds[MAX_EDITS];
	size_t nfds = 0;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+vh", lo, NULL)) != -1) {
		switch (c) {
		case O_SET:
		case O_POKE:
			if ((c == O_SET ? nsets : npokes) == MAX_EDITS) {
				gb_err("resume: at most %d --set and %d --poke", MAX_EDITS, MAX_EDITS);
				return GB_EXIT_USAGE;
			}
			if (c == O_SET)
				sets[nsets++] = optarg;
			else
				pokes[npokes++] = optarg;
			break;
		case O_PIDNS: pidns = true; break;
		case O_FD: {
			char *eq = strchr(optarg, '='), *end;
			long n = eq ? strtol(optarg, &end, 10) : -1;
			if (!eq || end != eq || eq == optarg || n < 0 || n > 1048576 || !eq[1]) {
				gb_err("resume: --fd %s: expected N=close or N=PATH", optarg);
				return GB_EXIT_USAGE;
			}
			if (nfds == MAX_EDITS) {
				gb_err("resume: at most %d --fd", MAX_EDITS);
				return GB_EXIT_USAGE;
			}
			fds[nfds++] = (struct gb_fd_choice){ (int)n, strcmp(eq + 1, "close") ? eq + 1 : NULL };
			break;
		}
		case 'v': gb_log_set_verbose(true); break;
		case 'h': usage(stdout); return GB_EXIT_OK;
		default: usage(stderr); return GB_EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		gb_err("resume: expected one snapshot file (see gebpf resume --help)");
		return GB_EXIT_USAGE;
	}
	struct gb_resume_opts ro = { .path = argv[optind], .sets = sets, .nsets = nsets,
				     .pokes = pokes, .npokes = npokes, .new_pidns = pidns, .fds = fds,
				     .nfds = nfds };
	return gb_resume_run(&ro);
}
