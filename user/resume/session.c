/* gebpf resume as a whole: load, edit, restore, let the process run and
 * wait for it (docs/resume.md). */
#include "resume/resume.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "common/log.h"

int gb_resume_run(const struct gb_resume_opts *o)
{
	char what[4200];
	struct gb_snapshot *s = NULL;
	struct gb_tracee t;
	int rc = GB_EXIT_FAIL;
	memset(&t, 0, sizeof(t));
	if (gb_snapshot_load(o->path, &s, "resume"))
		goto cleanup;
	for (size_t i = 0; i < o->nsets + o->npokes; i++) {
		const char *spec = i < o->nsets ? o->sets[i] : o->pokes[i - o->nsets];
		if (i < o->nsets ? gb_resume_edit_reg(s, spec) : gb_resume_edit_poke(s, spec)) {
			rc = GB_EXIT_USAGE;
			goto cleanup;
		}
	}
	snprintf(what, sizeof(what), "resume: %s", o->path);
	struct gb_restore_opts ro = { o->new_pidns, o->fds, o->nfds };
	if (gb_resume_restore(s, &t, what, &ro))
		goto cleanup;
	pid_t pid = t.pid, wpid = t.keeper ? t.keeper : pid; /* (pidns: not gebpf's child) */
	gb_tracee_detach(&t);
	int st;
	if (waitpid(wpid, &st, 0) != wpid) {
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
