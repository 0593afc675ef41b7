/* Recording directory (--out DIR), as the seed's recorder lays it out:
 *
 *   DIR/meta.json          command, pid, kernel, gebpf version, "trace"
 *                          (config + counts), "trace_blob", "snapshots"
 *   DIR/blobs/trace.jsonl  the trace
 *   DIR/blobs/snap-<vt>.core
 *
 * Every file is written under a temporary name and renamed when complete,
 * so a crash never leaves a half-written file under a final name.
 */
#ifndef GB_RECORD_RECORDING_H
#define GB_RECORD_RECORDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "record/jsonl.h"

struct gb_recording;

struct gb_recording_meta {
	char *const *argv;          /* launched command, or NULL when attached */
	pid_t pid;
	const char *end_reason;
	int exit_status;            /* wait status when the target exited, else -1 */
	const struct gb_jsonl_opts *trace;
	const struct gb_jsonl_counts *counts;
	uint64_t max_events;
};

/* Creates DIR and DIR/blobs.  NULL with a "gebpf: ..." line printed. */
struct gb_recording *gb_recording__open(const char *dir);
/* fd of blobs/trace.jsonl while it is written (under a temporary name). */
int gb_recording__trace_fd(struct gb_recording *r);
/* "DIR/blobs/<name>" (final path) into buf; returns buf. */
const char *gb_recording__blob_path(const struct gb_recording *r, const char *name, char *buf,
				    size_t len);
void gb_recording__add_snapshot(struct gb_recording *r, uint64_t vt, uint64_t pc, pid_t tid,
				const char *blob_name);
/* Close and rename the trace, write meta.json.  0 or -errno. */
int gb_recording__finish(struct gb_recording *r, const struct gb_recording_meta *m);
/* Remove temporaries (error path) and free. */
void gb_recording__free(struct gb_recording *r);

#endif
