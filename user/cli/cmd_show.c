/* gebpf show FILE [--json]: a snapshot's JSON view (vtrace's keys). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/cmds.h"
#include "common/log.h"
#include "snap/note_json.h"
#include "snap/snapshot.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: gebpf show FILE [--json]\n"
		   "Print a snapshot's JSON view: version, meta, exe, threads, regs, maps,\n"
		   "mem (per map: file offset, size, sha256), stacktrace, fds, vars.\n"
		   "  --json   the raw note (one line, as stored)\n");
}

int cmd_show(int argc, char **argv)
{
	static const struct option lo[] = { { "json", no_argument, NULL, 'j' },
					    { "help", no_argument, NULL, 'h' }, { 0 } };
	bool raw = false;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if (c == 'j') {
			raw = true;
		} else if (c == 'h') {
			usage(stdout);
			return GB_EXIT_OK;
		} else {
			gb_err("show: unknown option '%s' (see gebpf show --help)", argv[optind - 1]);
			return GB_EXIT_USAGE;
		}
	}
	if (argc - optind != 1) {
		gb_err("show: expected one snapshot FILE (see gebpf show --help)");
		return GB_EXIT_USAGE;
	}
	struct gb_snapshot *s;
	char err[512];
	if (gb_snapshot_load(argv[optind], &s, err, sizeof(err))) {
		gb_err("show: %s", err);
		return GB_EXIT_FAIL;
	}
	size_t len;
	char *text = gb_snap__json_build(s, &len);
	int ret = GB_EXIT_FAIL;
	if (!text) {
		gb_err("show: %s: out of memory", argv[optind]);
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
