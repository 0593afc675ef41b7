/* Recording directory (--out DIR), as the seed's recorder lays it out:
 *
 *   DIR/meta.json          command, pid, kernel, gebpf version, "trace"
 *                          (config + counts), "trace_blob", "snapshots"
 *   DIR/blobs/trace.jsonl.zst  the trace (zstd frames, record/zframes.h;
 *                          blobs/trace.jsonl uncompressed: --compress none)
 *   DIR/blobs/snap-<vt>.core
 *
 * Every file is written under a temporary name and renamed when complete,
 * so a crash never leaves a half-written file under a final name.
 *
 * Safety (docs/trace-format.md, "Recording directory"): every entry is made with
 * mkdirat/openat relative to a descriptor of DIR (and of DIR/blobs), with
 * O_NOFOLLOW and O_EXCL, so a symlink or a planted file never redirects a
 * write.  DIR itself must not be a symlink.  A DIR owned by another user is
 * refused unless it is empty; a non-empty DIR is refused unless force, which
 * removes gebpf's own files first (meta.json, blobs/trace.jsonl[.zst],
 * blobs/snap-*.core and their temporaries) and refuses anything else.
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

/* Creates DIR (and missing parents) and DIR/blobs.  NULL with a
 * "gebpf: ..." line printed. */
struct gb_recording *gb_recording__open(const char *dir, bool force);
/* fd of blobs/trace.jsonl while it is written (under a temporary name). */
int gb_recording__trace_fd(struct gb_recording *r);
/* The trace is zstd: it is named blobs/trace.jsonl.zst (meta.json's
 * "trace_blob"); else blobs/trace.jsonl (the default here). */
void gb_recording__set_zstd(struct gb_recording *r, bool zstd);
/* A path of blobs/<name> that goes through the descriptor of DIR/blobs
 * ("/proc/self/fd/N/<name>"), so a renamed or replaced DIR/blobs cannot
 * redirect the file; into buf; returns buf. */
const char *gb_recording__blob_path(const struct gb_recording *r, const char *name, char *buf,
				    size_t len);
/* 0, or -ENOMEM (printed): the snapshot would be missing from meta.json. */
int gb_recording__add_snapshot(struct gb_recording *r, uint64_t vt, uint64_t pc, pid_t tid,
			       const char *blob_name);
/* Close and rename the trace, write meta.json.  0 or -errno. */
int gb_recording__finish(struct gb_recording *r, const struct gb_recording_meta *m);
/* Remove temporaries (error path) and free. */
void gb_recording__free(struct gb_recording *r);

#endif
