/* One `gebpf trace` job from start to end: open the output, launch or
 * attach, resolve the range, run the engine, write the summary (always),
 * and leave the target as it was found. */
#ifndef GB_SESSION_H
#define GB_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/parse.h"
#include "trace/engine.h"

#define GB_MAX_SNAP_POINTS 64

struct gb_trace_opts {
	pid_t pid;                  /* attach, or 0 */
	char **argv;                /* launch, or NULL */
	const char *from;           /* trace --from SNAP (resume/resume.h), or NULL */
	bool aslr;
	struct gb_range_spec range;
	bool exec;
	uint64_t max_events;
	uint64_t max_insns;
	double duration;
	enum gb_trap_kind trap;     /* GB_TRAP_AUTO unless --trap / --step-all */
	int engine;                 /* enum gb_engine_kind (engine.h): --engine */
	bool faults;
	bool values;                /* --values (docs/trace-format.md "Values") */
	bool pin;
	const char *out_file;       /* -o FILE, or NULL for stdout */
	const char *out_dir;        /* --out DIR, or NULL */
	bool zstd;                  /* the trace in zstd frames (docs/trace-format.md
				       "Compressed traces"): -o FILE.zst, --out, or
				       --compress zstd */
	bool force;                 /* --force: replace an earlier recording in DIR */
	uint64_t snap_pcs[GB_MAX_SNAP_POINTS];
	size_t nsnap_pcs;
	uint64_t snap_vts[GB_MAX_SNAP_POINTS];
	size_t nsnap_vts;
};

/* Returns the process exit code (GB_EXIT_*); errors already printed. */
int gb_trace_session_run(const struct gb_trace_opts *o);

#endif
