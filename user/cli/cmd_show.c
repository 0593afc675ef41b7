/* gebpf show FILE [--json]: a snapshot's JSON view, with the keys of a
 * snapshot of vtrace (vivisect's Python debugger library): docs/snapshot-format.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/args.h"
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
	bool raw;
	int rc = cli_one_flag(argc, argv, "show", "json", &raw, usage);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1) {
		gb_err("show: expected one snapshot FILE (see gebpf show --help)");
		return GB_EXIT_USAGE;
	}
	struct gb_snapshot *s;
	if (gb_snapshot_load(argv[optind], &s, "show"))
		return GB_EXIT_FAIL;
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
