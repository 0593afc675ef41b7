/* gebpf resume: argv -> edits on the loaded snapshot -> resume room -> the
 * process runs on; gebpf waits for it and exits with its status. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cli/cmds.h"
#include "common/log.h"
#include "resume/resume.h"

#define MAX_EDITS 64

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gebpf resume [--set REG=VALUE]... [--poke ADDR=HEX]... SNAP\n"
		"Recreate the process of snapshot SNAP (its maps, registers, brk, auxv, files)\n"
		"and let it run on from the captured point; gebpf waits for it and exits with\n"
		"its exit status (128+N when signal N killed it).  Needs root (prctl PR_SET_MM).\n"
		"  --set REG=VALUE   set a general register first (rax, rip, fs_base, ...;\n"
		"                    VALUE decimal or 0x hex); repeatable\n"
		"  --poke ADDR=HEX   write bytes (hex digits, two per byte) at ADDR first;\n"
		"                    repeatable\n"
		"  -v, --verbose     diagnostics on stderr\n"
		"See docs/resume.md.\n");
}

int cmd_resume(int argc, char **argv)
{
	enum { O_SET = 256, O_POKE };
	static const struct option lo[] = {
		{ "set", required_argument, NULL, O_SET }, { "poke", required_argument, NULL, O_POKE },
		{ "verbose", no_argument, NULL, 'v' }, { "help", no_argument, NULL, 'h' }, { 0 } };
	const char *sets[MAX_EDITS], *pokes[MAX_EDITS];
	size_t nsets = 0, npokes = 0;
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
		case 'v': gb_log_set_verbose(true); break;
		case 'h': usage(stdout); return GB_EXIT_OK;
		default: usage(stderr); return GB_EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		gb_err("resume: expected one snapshot file (see gebpf resume --help)");
		return GB_EXIT_USAGE;
	}
	const char *path = argv[optind];
	char what[4200];
	struct gb_snapshot *s = NULL;
	struct gb_tracee t;
	int rc = GB_EXIT_FAIL;
	memset(&t, 0, sizeof(t));
	if (gb_snapshot_load(path, &s, "resume"))
		goto cleanup;
	for (size_t i = 0; i < nsets + npokes; i++) {
		const char *spec = i < nsets ? sets[i] : pokes[i - nsets];
		if (i < nsets ? gb_resume_edit_reg(s, spec) : gb_resume_edit_poke(s, spec)) {
			rc = GB_EXIT_USAGE;
			goto cleanup;
		}
	}
	snprintf(what, sizeof(what), "resume: %s", path);
	if (gb_resume_restore(s, &t, what))
		goto cleanup;
	pid_t pid = t.pid;
	gb_tracee_detach(&t);
	int st;
	if (waitpid(pid, &st, 0) != pid) {
		gb_err("resume: pid %d: lost the resumed process", pid);
	} else if (WIFSIGNALED(st)) {
		gb_err("resume: pid %d: killed by SIG%s", pid, sigabbrev_np(WTERMSIG(st)) ?: "?");
		rc = 128 + WTERMSIG(st);
	} else {
		rc = WEXITSTATUS(st);
	}
cleanup:
	gb_tracee_free(&t);
	gb_snapshot_free(s);
	return rc;
}
