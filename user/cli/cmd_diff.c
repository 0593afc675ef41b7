/* gebpf diff A B: two snapshots (ELF cores) or two traces (JSONL, zstd, a
 * recording directory, `-`).  Exit 0 equal, 1 different, 2 usage or an
 * input that cannot be read (as diff(1) and cmp(1) do: "different" never
 * means "broken"). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cmds.h"
#include "common/log.h"
#include "record/treader.h"
#include "snap/diff.h"
#include "snap/snapshot.h"
#include "tdiff/tdiff.h"
#include "tdiff/values.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: gebpf diff A B [--normalise qemu|lackey] [--no-rebase] [--binary FILE]\n"
		   "                      [--maps A.maps,B.maps] [--max-diffs N] [--json] [--context N]\n"
		   "                      [--ignore-vt] [--ignore-vcpu] [--window N] [--sync K]\n"
		   "                      [--region-gap BYTES] [--ignore-values KIND[,KIND]]\n"
		   "Snapshots: registers per thread (matched by index), maps added/removed,\n"
		   "  address ranges of pages whose bytes differ.\n"
		   "Traces (JSONL, .zst, a recording directory, or - for stdin): every divergence,\n"
		   "  with symbol+offset, disassembly and emulator-quirk hints, then a summary.\n"
		   "  --normalise qemu|lackey  undo the emulator's known quirks (docs/diff.md)\n"
		   "  --no-rebase              compare raw addresses (default: rebased per region)\n"
		   "  --binary FILE            symbols and instructions (default: a recording's meta.json)\n"
		   "  --maps A,B               /proc/PID/maps files naming each trace's regions\n"
		   "  --max-diffs N            divergences shown in detail (default 20; all are counted)\n"
		   "  --json                   one JSON document\n"
		   "  --context N              records of A shown before each divergence (default 3)\n"
		   "  --window N, --sync K     resynchronise within N groups on K agreeing ones (4096, 3)\n"
		   "  --region-gap BYTES       cut regions where touched addresses are further apart\n"
		   "                           (default 1M; K and M suffixes, 0x hex)\n"
		   "  --ignore-values KIND     with values on both sides (trace --values): leave out\n"
		   "                           value differences of these kinds, counted (cpuid,\n"
		   "                           rdtsc, rdrand, x87-transcendental, syscall,\n"
		   "                           undefined-flags, x87-flags, address-flags,\n"
		   "                           carried; docs/diff.md\n"
		   "                           \"Values\")\n"
		   "Exit status: 0 equal, 1 different, 2 usage or unreadable input.\n");
}

static int number(const char *opt, const char *arg, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < lo || v > hi) {
		gb_err("diff: %s expects %ld..%ld, got '%s'", opt, lo, hi, arg);
		return -1;
	}
	*out = v;
	return 0;
}

/* A byte count: decimal or 0x hex, an optional K or M suffix (KiB, MiB),
 * from 1 to 1 TiB. */
static int region_gap(const char *arg, unsigned long long *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(arg, &end, 0), mul = 1;
	if (end != arg && (*end == 'k' || *end == 'K'))
		mul = 1ull << 10, end++;
	else if (end != arg && (*end == 'm' || *end == 'M'))
		mul = 1ull << 20, end++;
	if (errno || end == arg || *end || arg[0] == '-' || !v || v > (1ull << 40) / mul) {
		gb_err("diff: --region-gap expects a byte count from 1 to 1T (K and M suffixes, 0x hex), "
		       "got '%s'", arg);
		return -1;
	}
	*out = v * mul;
	return 0;
}

static int diff_snapshots(struct gb_treader *ra, struct gb_treader *rb)
{
	struct gb_treader *rd[2] = { ra, rb };
	for (int s = 0; s < 2; s++)
		if (!gb_treader__reopenable(rd[s])) {
			gb_err("diff: %s: a snapshot must be given as a file path (it is read by path, not "
			       "from a pipe)", gb_treader__name(rd[s]));
			return GB_EXIT_USAGE;
		}
	struct gb_snapshot *a = NULL, *b = NULL;
	int ret = GB_EXIT_USAGE;
	if (!gb_snapshot_load(gb_treader__name(ra), &a, "diff") && !gb_snapshot_load(gb_treader__name(rb), &b, "diff"))
		ret = gb_snap_diff(a, b, stdout) ? 1 : GB_EXIT_OK;
	gb_snapshot_free(a);
	gb_snapshot_free(b);
	return ret;
}

/* --ignore-values KIND[,KIND...] (tdiff/values.h's kinds). */
static int ignore_values(const char *arg, unsigned *mask)
{
	char *copy = strdup(arg), *save = NULL;
	int r = copy ? 0 : -1;
	for (char *w = copy ? strtok_r(copy, ",", &save) : NULL; w && !r; w = strtok_r(NULL, ",", &save)) {
		enum gb_vkind k = gb_vkind_parse(w);
		if (!k) {
			char all[256];
			int n = 0;
			for (int i = 1; i < GB_VK_N; i++)
				n += snprintf(all + n, sizeof(all) - (size_t)n, "%s%s", i > 1 ? ", " : "",
					      gb_vkind_info(i)->name);
			gb_err("diff: --ignore-values: '%s' is not a kind of value difference (%s)", w, all);
			r = -1;
		}
		*mask |= 1u << k;
	}
	free(copy);
	return r;
}

int cmd_diff(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "ignore-vt", no_argument, NULL, 't' }, { "ignore-vcpu", no_argument, NULL, 'c' },
		{ "normalise", required_argument, NULL, 'n' }, { "normalize", required_argument, NULL, 'n' },
		{ "context", required_argument, NULL, 'C' }, { "no-rebase", no_argument, NULL, 'R' },
		{ "binary", required_argument, NULL, 'b' }, { "maps", required_argument, NULL, 'm' },
		{ "max-diffs", required_argument, NULL, 'M' }, { "json", no_argument, NULL, 'j' },
		{ "window", required_argument, NULL, 'w' }, { "sync", required_argument, NULL, 's' },
		{ "region-gap", required_argument, NULL, 'g' }, { "help", no_argument, NULL, 'h' },
		{ "ignore-values", required_argument, NULL, 'V' }, { 0 } };
	struct gb_tdiff_opts o = { .context = 3, .max_diffs = 20, .window = 4096, .sync = 3 };
	char *maps = NULL;
	long v;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "hC:", lo, NULL)) != -1) {
		switch (c) {
		case 't': o.ignore_vt = true; break;
		case 'c': o.ignore_vcpu = true; break;
		case 'R': o.no_rebase = true; break;
		case 'j': o.json = true; break;
		case 'b': o.binary = optarg; break;
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
		case 'm':
			maps = optarg;
			break;
		case 'C':
			if (number("--context", optarg, 0, 1000, &v))
				return GB_EXIT_USAGE;
			o.context = (int)v;
			break;
		case 'M':
			if (number("--max-diffs", optarg, 0, 1L << 40, &o.max_diffs))
				return GB_EXIT_USAGE;
			break;
		case 'w':
			if (number("--window", optarg, 1, 1L << 20, &o.window))
				return GB_EXIT_USAGE;
			break;
		case 's':
			if (number("--sync", optarg, 1, 1000, &v))
				return GB_EXIT_USAGE;
			o.sync = (int)v;
			break;
		case 'g':
			if (region_gap(optarg, &o.region_gap))
				return GB_EXIT_USAGE;
			break;
		case 'V':
			if (ignore_values(optarg, &o.ignore_values))
				return GB_EXIT_USAGE;
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
	if (!strcmp(pa, "-") && !strcmp(pb, "-")) {
		gb_err("diff: - (stdin) given for both A and B: one of them must be a file");
		return GB_EXIT_USAGE;
	}
	char *comma = maps ? strchr(maps, ',') : NULL;
	if (maps && (!comma || comma == maps || !comma[1])) {
		gb_err("diff: --maps expects A.maps,B.maps, got '%s'", maps);
		return GB_EXIT_USAGE;
	}
	char *maps_a = maps ? strndup(maps, (size_t)(comma - maps)) : NULL;
	o.maps[0] = maps_a;
	o.maps[1] = comma ? comma + 1 : NULL;
	struct gb_treader *ra = NULL, *rb = NULL;
	unsigned fl = o.no_rebase ? 0 : GB_TREADER_REWIND;
	int ret = GB_EXIT_USAGE;
	if (gb_treader__open(pa, fl, "diff", &ra) || gb_treader__open(pb, fl, "diff", &rb))
		goto out;
	bool ea = gb_treader__format(ra) == GB_TFORMAT_ELF, eb = gb_treader__format(rb) == GB_TFORMAT_ELF;
	if (ea != eb) {
		gb_err("diff: %s is %s but %s is not: compare two snapshots or two traces", ea ? pa : pb,
		       "an ELF snapshot", ea ? pb : pa);
	} else if (ea) {
		ret = diff_snapshots(ra, rb);
	} else {
		int r = gb_tdiff(ra, rb, &o, stdout);
		ret = r < 0 ? GB_EXIT_USAGE : r ? 1 : GB_EXIT_OK;
	}
out:
	gb_treader__free(ra);
	gb_treader__free(rb);
	free(maps_a);
	return ret;
}
