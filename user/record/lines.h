/* The one writer discipline for every JSONL output (trace, sample -o):
 *
 *  - whole lines only: a line is handed over complete and reaches the output
 *    complete or not at all (a write error cuts a regular file back to its
 *    last whole line; pipes get writes of whole lines of at most PIPE_BUF);
 *  - the summary last: gb_lines__finish() writes it after every other line,
 *    removing whole lines from the end of a regular file (counted as lost)
 *    until it fits on a full disk;
 *  - the producer never calls write(): a writer thread does, from a bounded
 *    buffer, and writes what it holds at least every 250 ms (a SIGKILLed
 *    gebpf leaves what was produced up to ~0.25 s before);
 *  - a stalled output (a FIFO or pipe nobody reads) blocks the producer only
 *    while the buffer is full and only until SIGINT/SIGTERM (common/sigflag)
 *    or the give-up time, once it has taken nothing for a second (ten for a
 *    regular file): then lines are refused (the caller counts them
 *    dropped), the status says stalled, and finish() writes the
 *    summary if the output takes it within a second.
 *
 * A zstd output (opts.zstd: record/zframes.h) keeps these rules with whole
 * frames for whole lines (lines_zstd.c): the writer thread compresses, a
 * frame ends every 4 MiB of lines or every second, a write error cuts a
 * regular file back to its last whole frame, the summary is a frame of its
 * own (whole frames removed to make room), then the seek table.
 *
 * Concurrency: one producer thread; the writer thread is internal.
 */
#ifndef GB_RECORD_LINES_H
#define GB_RECORD_LINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gb_lines_opts {
	double give_up_after;   /* seconds after __new (e.g. --duration): a stalled
				   output stops blocking the producer; 0 = never */
	size_t capacity;        /* bytes buffered at most; 0 = 2 MiB */
	bool direct;            /* fd is a regular file gebpf opened itself (its
				   offset shared with nobody): its aligned part
				   may go with O_DIRECT where the file system
				   can, whichever way is faster (record/wmode.h) */
	bool direct_first;      /* ... starting with O_DIRECT (tests) */
	bool zstd;              /* the output is zstd frames of whole lines with a
				   seek table (record/zframes.h; lines_zstd.c:
				   the same discipline, frames instead of lines) */
	int zstd_level;         /* 0 = GB_ZFRAMES_LEVEL */
};

struct gb_lines;

/* fd is borrowed (not closed).  NULL with errno set. */
struct gb_lines *gb_lines__new(int fd, const struct gb_lines_opts *o);

/* Room for whole lines of at most max bytes in all (each ends with '\n'):
 * format into the pointer returned, then gb_lines__commit() their length
 * and how many lines they are (the writer counts no newlines).
 * One reservation at a time (one producer thread); no lock is held in
 * between, but the writer takes nothing of that buffer until the commit.
 * NULL when the lines cannot be taken (a write error, or the output stalled
 * and gave up): count them dropped; nothing to commit. */
char *gb_lines__reserve(struct gb_lines *w, size_t max);
void gb_lines__commit(struct gb_lines *w, size_t len, uint64_t lines);

/* Wait until every committed line is written (before a snapshot).  Same
 * give-up rules as a full buffer.  0, -errno of a write error, or -EAGAIN. */
int gb_lines__flush(struct gb_lines *w);

/* Formats the summary line (ending in '\n') into buf (at least 512 bytes);
 * called again after lines were removed to make room (status .lost grew). */
typedef size_t (*gb_lines_summary_fn)(void *ctx, char *buf);
/* Write everything, then the summary; stops the writer thread.  0, -errno of
 * the first write error, or -EAGAIN when the output stalled and lines were
 * abandoned. */
int gb_lines__finish(struct gb_lines *w, gb_lines_summary_fn fn, void *ctx);

struct gb_lines_status {
	int err;          /* sticky -errno of the first write error, 0 if none
			     (a stall is not one) */
	bool stalled;     /* the output took nothing for a second while lines
			     wait, or the producer gave up on it */
	uint64_t lost;    /* lines committed that are not in the output (write
			     error, cut for the summary, abandoned on a stall) */
	uint64_t bytes_direct, switches; /* written with O_DIRECT; changes of way */
};
void gb_lines__status(struct gb_lines *w, struct gb_lines_status *st);
/* After finish() failed: what happened, for a message, in buf: "the reader
 * stopped reading (pipe full for N s)" when a pipe or FIFO stalled (N: how
 * long it had taken nothing when it was given up), "the output took nothing
 * for N s" for another output, else the write error's strerror. */
const char *gb_lines__failure(struct gb_lines *w, char *buf, size_t len);
void gb_lines__free(struct gb_lines *w);

#endif
