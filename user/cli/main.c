/* gebpf: command table.  No logic here: each command lives in cmd_<name>.c. */
#include <stdio.h>
#include <string.h>

#include "cli/cmds.h"
#include "common/log.h"
#include "common/version.h"

static const struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} cmds[] = {
	{ "trace",  cmd_trace,  "exact instruction + memory-access trace (ptrace single-step)" },
	{ "snap",   cmd_snap,   "deterministic snapshot as an ELF core + JSON note" },
	{ "sample", cmd_sample, "low-overhead range-filtered sampling and page faults (BPF)" },
	{ "show",   cmd_show,   "print a snapshot's JSON view" },
	{ "read",   cmd_read,   "print bytes of a snapshot's memory" },
	{ "diff",   cmd_diff,   "compare two snapshots or two JSONL traces" },
	{ "resume", cmd_resume, "recreate a snapshot's process and let it run on" },
	{ "qemu",   cmd_qemu,   "run a program under qemu-x86_64 with gebpf's trace plugin" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: gebpf COMMAND [OPTIONS]   (gebpf COMMAND --help for details)\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-7s %s\n", cmds[i].name, cmds[i].summary);
	fprintf(f, "\ngebpf %s (see README.md and docs/)\n", GB_VERSION);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return GB_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return GB_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("gebpf %s\n", GB_VERSION);
		return GB_EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	gb_err("%s: unknown command (try 'gebpf --help')", argv[1]);
	return GB_EXIT_USAGE;
}
