/* The stepping engine: drives ptrace + decode, hands events to the JSONL
 * writer.  One engine traces one process (all its threads).
 *
 *   struct gb_engine *e = gb_engine__new(&tracee, &opts, writer);
 *   enum gb_end why = gb_engine__run(e);   // until an end condition
 *   gb_engine__free(e);                     // leaves every thread stopped
 *
 * Threads are stepped one at a time in a fixed order (thread index order,
 * one instruction each), so the trace is a valid total order and a rerun of
 * a deterministic program is identical.  vt counts in-range instructions;
 * vcpu is a thread's index in order of first appearance in the trace.
 */
#ifndef GB_TRACE_ENGINE_H
#define GB_TRACE_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "record/jsonl.h"
#include "ptrace/tracee.h"

struct gb_engine;

/* Called when a snapshot point is reached (all threads stopped). */
typedef int (*gb_snap_cb)(void *ctx, struct gb_tracee *t, pid_t tid, uint64_t vt, uint64_t pc);

/* Called with page faults seen for the instruction just stepped, to merge
 * them as fault lines (the BPF fault probe, when --faults is on). */
typedef void (*gb_faults_cb)(void *ctx, struct gb_engine *e, pid_t tid, uint32_t vcpu,
			     uint64_t pc, uint64_t vt);

/* How a thread that runs natively is stopped when it enters the range
 * (docs/trace.md "Entry traps"). */
enum gb_trap_kind {
	GB_TRAP_AUTO = 0,   /* probes for file-backed code, else pages */
	GB_TRAP_PROBES,     /* uprobes + BPF at every entry address (trap/probes/probes.h) */
	GB_TRAP_PAGES,      /* PROT_EXEC removed from the range's pages (trap/pages/pagetrap.h) */
	GB_TRAP_NONE,       /* single-step everything */
	GB_TRAP_PATCH,      /* entries patched into jumps to a stop-free code cache
			     * (trap/patch/trap.c); else the probe trap */
};

/* Which engine runs the owner inside the range (docs/trace.md "Engines"). */
enum gb_engine_kind {
	GB_ENGINE_AUTO = 0,  /* jit where it applies, else step */
	GB_ENGINE_STEP,      /* single-step every instruction (the reference) */
	GB_ENGINE_JIT,       /* translated code (needs the probe trap) */
};

struct gb_trap;
struct gb_trace_range;

struct gb_engine_opts {
	struct gb_trace_range *range; /* the range (trace/range.h): the session's */
	struct gb_trap *trap;         /* the entry trap (trace/trap.h): the session's */
	uint64_t max_insns;           /* 0 = unlimited */
	uint64_t first_vt;            /* vt of the first instruction (trace --from SNAP) */
	double duration;              /* seconds, 0 = unlimited */
	bool pin;                     /* pin tracer + tracee to one CPU */
	bool jit;                     /* the translating engine where it applies
				       * (--engine jit; with a trap that runs threads
				       * natively) */
	bool values;                  /* --values: the step runner takes what each
				       * instruction read, wrote and computed
				       * (docs/trace-format.md "Values"); not with jit */
	/* Snapshot points. */
	const uint64_t *snap_pcs;  size_t nsnap_pcs;
	const uint64_t *snap_vts;  size_t nsnap_vts;
	gb_snap_cb snap_cb;        void *snap_ctx;
	gb_faults_cb faults_cb;    void *faults_ctx;
};

enum gb_end {
	GB_END_EXITED,      /* the process exited (or was killed) */
	GB_END_MAX_INSNS,
	GB_END_DURATION,
	GB_END_SIGNAL,      /* Ctrl-C / SIGTERM to gebpf */
	GB_END_OUTPUT,      /* the output failed (ENOSPC, ...) */
	GB_END_ERROR,       /* internal error (message printed) */
};

struct gb_engine *gb_engine__new(struct gb_tracee *t, const struct gb_engine_opts *o,
				 struct gb_jsonl *out);
enum gb_end gb_engine__run(struct gb_engine *e);
/* Exit status of the process when run() returned GB_END_EXITED (wait status). */
int gb_engine__exit_status(const struct gb_engine *e);
uint64_t gb_engine__vt(const struct gb_engine *e);
void gb_engine__free(struct gb_engine *e);
const char *gb_end_name(enum gb_end why);

struct gb_engine_stats {
	uint64_t steps;          /* single-steps issued */
	uint64_t in_range;       /* in-range instructions traced (vt) */
	uint64_t entries;        /* trap entries into the range (page faults or probe hits) */
	uint64_t decodes;        /* instructions decoded (decode-cache misses) */
	uint64_t revalidations;  /* cached decodes whose bytes were read again */
	uint64_t jit_runs;       /* entries into translated code */
	uint64_t jit_stops;      /* stops of translated code (exits, drains, signals) */
	uint64_t jit_insns;      /* in-range instructions run translated */
	uint64_t jit_blocks;     /* blocks translated */
	uint64_t native_handlers; /* signal handlers of the owner run natively (ehandler.c) */
};
void gb_engine__stats(const struct gb_engine *e, struct gb_engine_stats *s);

#endif
