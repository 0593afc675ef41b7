/* gebpf diff A B: two snapshots (ELF cores) or two JSONL traces.
 * Exit 0 equal, 1 different, 2 usage or an input that cannot be read (as
 * diff(1) and cmp(1) do: "different" never means "broken"). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cmds.h"
#include "common/log.h"
#include "record/trace_diff.h"
#include "snap/diff.h"
#include "snap/snapshot.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: gebpf diff A B [--ignore-vt] [--ignore-vcpu] [--normalise qemu|lackey]\n"
		   "                      [--context N]\n"
		   "Snapshots: registers per thread (matched by index), maps added/removed,\n"
		   "  address ranges of pages whose bytes differ.\n"
		   "Traces (JSONL): the first diverging record with context, and counts per type.\n"
		   "  --normalise qemu|lackey  undo the emulator's known quirks (docs/diff.md)\n"
		   "Exit status: 0 equal, 1 different, 2 usage or unreadable input.\n");
}

/* 1 an ELF file, 0 not, -1 unreadable (printed with the real reason). */
static int is_elf(const char *path)
{
	char m[4];
	FILE *f = fopen(path, "rb");
	if (!f) {
		gb_err("diff: %s: %s", path, strerror(errno));
		return -1;
	}
	int elf = fread(m, 1, 4, f) == 4 && !memcmp(m, "\177ELF", 4);
	if (ferror(f)) {
		gb_err("diff: %s: %s", path, strerror(errno));
		elf = -1;
	}
	fclose(f);
	return elf;
}

int cmd_diff(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "ignore-vt", no_argument, NULL, 't' }, { "ignore-vcpu", no_argument, NULL, 'c' },
		{ "normalise", required_argument, NULL, 'n' }, { "normalize", required_argument, NULL, 'n' },
		{ "context", required_argument, NULL, 'C' }, { "help", no_argument, NULL, 'h' }, { 0 } };
	struct gb_trace_diff_opts o = { .context = 3 };
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "hC:", lo, NULL)) != -1) {
		switch (c) {
		case 't': o.ignore_vt = true; break;
		case 'c': o.ignore_vcpu = true; break;
		case 'n':
			if (!strcmp(optarg, "qemu"))
				o.norm = GB_NORM_QEMU;
			else if (!strcmp(optarg, "lackey"))
				o.norm = GB_NORM_LACKEY;
			else {
				gb_err("diff: --normalise expects qemu or lackey, got '%s'", optarg);
				return GB_EXIT_USAGE;
			}
			break;
		case 'C':
			o.context = atoi(optarg);
			if (o.context < 0 || o.context > 1000) {
				gb_err("diff: --context expects 0..1000, got '%s'", optarg);
				return GB_EXIT_USAGE;
			}
			break;
		case 'h': usage(stdout); return GB_EXIT_OK;
		default: return cli_bad_option("diff", argv, "hC:");
		}
	}
	if (argc - optind != 2) {
		gb_err("diff: expected two files A B (see gebpf diff --help)");
		return GB_EXIT_USAGE;
	}
	const char *pa = argv[optind], *pb = argv[optind + 1];
	int ea = is_elf(pa), eb = ea < 0 ? -1 : is_elf(pb);
	if (ea < 0 || eb < 0)
		return GB_EXIT_USAGE;
	if (ea != eb) {
		gb_err("diff: %s is %s but %s is not: compare two snapshots or two traces", ea ? pa : pb,
		       "an ELF snapshot", ea ? pb : pa);
		return GB_EXIT_USAGE;
	}
	if (!ea) {
		int r = gb_trace_diff(pa, pb, &o, stdout);
		if (r < 0)
			return GB_EXIT_USAGE;
		return r ? 1 : GB_EXIT_OK;
	}
	struct gb_snapshot *a = NULL, *b = NULL;
	int ret = GB_EXIT_USAGE;
	if (!gb_snapshot_load(pa, &a, "diff") && !gb_snapshot_load(pb, &b, "diff"))
		ret = gb_snap_diff(a, b, stdout) ? 1 : GB_EXIT_OK;
	gb_snapshot_free(a);
	gb_snapshot_free(b);
	return ret;
}
