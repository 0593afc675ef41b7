/* The trace session's state, shared by session.c (start to end) and
 * session/choose.c (which entry trap). */
#ifndef GB_SESSION_INT_H
#define GB_SESSION_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "ptrace/tracee.h"
#include "record/output.h"
#include "session/session.h"
#include "trace/range.h"
#include "trace/trap.h"
#include "trap/probes/probes.h"

struct gb_xol;

struct session {
	const struct gb_trace_opts *o;
	struct gb_tracee t;
	bool have_target;
	uint64_t first_vt;              /* --from: the snapshot's vt */
	int fd;
	struct gb_output file;          /* -o FILE */
	struct gb_recording *rec;
	struct gb_jsonl *out;
	struct gb_engine *eng;
	struct gb_faults *faults;       /* --faults */
	uint32_t fault_vcpu;            /* the instruction being merged */
	uint64_t fault_pc, fault_vt;
	pid_t fault_tid;
	struct gb_range_spec range;     /* resolved */
	bool range_pending;             /* MODULE:SYMBOL of a module not mapped yet */
	uint64_t early_key;             /* resolved before the attach (early), its maps' key */
	char pending_path[4096];        /* its file, and the symbol's link-time range */
	uint64_t pending_lo, pending_hi;
	struct gb_probes *probes;       /* the probe trap's probes, when it is used */
	struct gb_xol *xol;             /* the launch's uprobe, until the trap is known */
	char file_path[4096];           /* the range's file (--trap patch), link-time */
	uint64_t file_lo, file_hi, file_bias;
	enum gb_trap_kind trap;         /* the trap used */
	struct gb_trap *entry_trap;     /* ... made for the engine (trace/trap.h) */
	struct gb_trace_range live;     /* the range as the trace knows it (trace/range.h) */
	char range_text[600];
	const char *out_name;
	bool out_own;                   /* s->fd is a file gebpf opened (record/output.h) */
};

/* Which trap stops threads at the range's entry (docs/trace.md "Entry
 * traps"), into s->trap (the probe trap's probes made: s->probes).  0 or -1
 * (said why). */
int gb_session__choose_trap(struct session *s);
/* The patch trap refused after all (said why): the probe trap for --trap
 * patch, the default's next choice (probes, else pages) for the default. */
int gb_session__patch_refused(struct session *s);

#endif
