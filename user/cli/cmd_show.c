/* gebpf show FILE [--json] [--lines]: a snapshot's JSON view, with the keys
 * of a snapshot of vtrace (vivisect's Python debugger library):
 * docs/snapshot-format.md; or a trace's summary, or its lines (JSONL,
 * zstd, a recording directory, - for stdin): docs/show.md. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/args.h"
#include "cli/cmds.h"
#include "common/log.h"
#include "record/treader.h"
#include "record/tsummary.h"
#include "snap/note_json.h"
#include "snap/snapshot.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: gebpf show FILE [--json] [--lines]\n"
		   "A snapshot: its JSON view: version, meta, exe, threads, regs, maps,\n"
		   "  mem (per map: file offset, size, sha256), stacktrace, fds, vars.\n"
		   "A trace (JSONL, .zst, a recording directory, or - for stdin): lines per type,\n"
		   "  vcpus, pc span, the summary line, zstd frames.\n"
		   "  --json   the snapshot's note as stored (one line); a trace's summary as JSON\n"
		   "  --lines  a trace's lines, decompressed (gebpf show --lines t.jsonl.zst | jq)\n");
}

static int show_snapshot(const char *path, bool raw)
{
	struct gb_snapshot *s;
	if (gb_snapshot_load(path, &s, "show"))
		return GB_EXIT_FAIL;
	size_t len;
	char *text = gb_snap__json_build(s, &len);
	int ret = GB_EXIT_FAIL;
	if (!text) {
		gb_err("show: %s: out of memory", path);
	} else if (raw) {
		printf("%s\n", text);
		ret = GB_EXIT_OK;
	} else {
		cJSON *doc = cJSON_Parse(text);
		char *pretty = doc ? cJSON_Print(doc) : NULL;
		if (pretty) {
			printf("%s\n", pretty);
			ret = GB_EXIT_OK;
		}
		free(pretty);
		cJSON_Delete(doc);
	}
	free(text);
	gb_snapshot_free(s);
	return ret;
}

static int show_lines(struct gb_treader *rd)
{
	const char *line;
	size_t len;
	int r;
	while ((r = gb_treader__next(rd, &line, &len)) > 0) {
		if (fwrite(line, 1, len, stdout) != len || putchar('\n') == EOF)
			break;
	}
	if (fflush(stdout) || ferror(stdout)) {
		if (errno != EPIPE)
			gb_err("show: writing the lines: %s", strerror(errno));
		return GB_EXIT_FAIL;
	}
	return r < 0 ? GB_EXIT_FAIL : GB_EXIT_OK;
}

int cmd_show(int argc, char **argv)
{
	static const struct option lo[] = { { "json", no_argument, NULL, 'j' }, { "lines", no_argument, NULL, 'l' },
					    { "help", no_argument, NULL, 'h' }, { 0 } };
	bool json = false, lines = false;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'j': json = true; break;
		case 'l': lines = true; break;
		case 'h': usage(stdout); return GB_EXIT_OK;
		default: return cli_bad_option("show", argv, "h");
		}
	}
	if (argc - optind != 1) {
		gb_err("show: expected one FILE, a snapshot or a trace (see gebpf show --help)");
		return GB_EXIT_USAGE;
	}
	if (json && lines) {
		gb_err("show: --json and --lines: choose one");
		return GB_EXIT_USAGE;
	}
	const char *path = argv[optind];
	struct gb_treader *rd;
	if (gb_treader__open(path, 0, "show", &rd))
		return GB_EXIT_FAIL;
	int ret = GB_EXIT_FAIL;
	if (gb_treader__format(rd) == GB_TFORMAT_ELF) {
		if (lines)
			gb_err("show: %s: --lines is for traces, this is an ELF file (a snapshot)", path);
		else if (!gb_treader__reopenable(rd))
			gb_err("show: %s: a snapshot must be given as a file path (it is read by path, not from "
			       "a pipe)", path);
		else
			ret = show_snapshot(gb_treader__name(rd), json);
		if (lines)
			ret = GB_EXIT_USAGE;
	} else if (lines) {
		ret = show_lines(rd);
	} else {
		struct gb_tsummary s;
		if (!gb_tsummary_read(rd, &s)) {
			gb_tsummary_print(&s, gb_treader__name(rd), json, stdout);
			ret = GB_EXIT_OK;
		}
		gb_tsummary_free(&s);
	}
	gb_treader__free(rd);
	return ret;
}
