/* One whole `gebpf sample` run: scope (processes, a launched command, a
 * cgroup, everything), the sampler, the loop, unwinding, and the outputs.
 * The CLI (user/cli/cmd_sample.c) turns argv into these options.  Command
 * page: docs/sample.md.
 *
 * Order of work: targets are found or launched, the BPF programs are
 * loaded and attached (every privilege check), and only then are output
 * files created (mode 0644 before umask), so a refused run leaves no file.
 */
#ifndef GB_SAMPLE_SESSION_H
#define GB_SAMPLE_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/parse.h"
#include "probe/sampler.h"

#define GB_SAMPLE_MAX_PIDS 64

/* PPROF_ONLY: the profile goes to files only (--pprof, --flamegraph,
 * --pprof-dir), and -o FILE, when given, gets the JSONL lines too. */
enum gb_sample_mode { GB_SAMPLE_LINES, GB_SAMPLE_REPORT, GB_SAMPLE_FOLDED, GB_SAMPLE_PPROF_ONLY };

struct gb_sample_session_opts {
	/* Scope: pids, or cmd, or all, or cgroup. */
	pid_t pids[GB_SAMPLE_MAX_PIDS];
	size_t npids;
	char **cmd;
	bool all;
	const char *cgroup;        /* a cgroup v2 directory */

	struct gb_range_spec range;
	uint64_t hz;
	double duration;           /* 0: none */
	const char *event;
	bool faults, aslr;
	enum gb_sample_mode mode;
	const char *pprof;         /* also write a pprof profile here */
	const char *flame;         /* ... and an SVG flame graph here (sample/flame.h) */
	/* Continuous mode: one pprof profile per period into a directory
	 * (sample/pprof_dir.h), the oldest removed beyond keep files or
	 * max_age seconds (0: no bound). */
	const char *pprof_dir;
	double every;              /* the period, seconds */
	uint64_t keep;
	double max_age;
	uint64_t top;
	const char *out;           /* NULL: stdout */
	enum gb_stack_mode stacks;
	bool kernel;
	uint32_t stack_size;
	bool no_python;            /* no Python frames (--no-python) */
};

/* Run it.  Returns the exit status (GB_EXIT_*); errors are printed. */
int gb_sample_session_run(const struct gb_sample_session_opts *o);

#endif
