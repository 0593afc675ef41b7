/* The writer's state, shared by lines.c (the writer discipline, plain
 * lines), lines_zstd.c (the same discipline for zstd frames) and
 * lines_io.c (the writes to the fd both make).  lines.c calls the other
 * two, lines_zstd.c calls lines_io.c, never the other way. */
#ifndef GB_RECORD_LINES_INT_H
#define GB_RECORD_LINES_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "record/lines.h"
#include "record/wmode.h"

#define TICK_MS 250         /* the writer writes what it holds this often */
#define SLICE_MS 100        /* waits are sliced to notice signals and quit */
#define STALL_S 1.0         /* no progress this long = stalled (a pipe, a tty) */
#define STALL_FILE_S 10.0   /* ... a regular file: a loaded VM's disk can hold
			     * one 1 MiB write for over a second */
#define NENDS 64            /* line ends remembered to make room for the summary */
#define SUMMARY_MAX 512
#define DIO_ALIGN 4096      /* direct writes: file offset, length and buffer aligned */
#define ZFRAME_NS 1000000000ll /* zstd: a frame ends at least this often */

struct gb_zframes;

struct gb_lines {
	int fd;
	bool regular;               /* can be cut back with ftruncate */
	bool pipe;                  /* a pipe or FIFO (for the stall message) */
	double stalled_for;         /* seconds the output had taken nothing when
				       finish() gave up on it (0: it did not) */
	size_t half;                /* size of each of the two buffers */
	char *fill, *out;           /* the producer's and the writer's buffer */
	size_t fill_len, out_len;   /* out_len != 0: the writer is writing */
	uint64_t fill_lines, out_lines; /* the lines in them (fill's after carry) */
	bool pending;               /* a reservation is being filled (no lock held):
				       fill is not swapped meanwhile */
	bool swap_wait;             /* the writer waits for its commit */
	pthread_mutex_t mu;
	pthread_cond_t work, room;  /* wake the writer / wake the producer */
	pthread_t thread;
	bool running;
	atomic_bool quit;
	atomic_llong progress_ns;   /* last time the output took bytes */
	int err;                    /* sticky -errno */
	bool gave_up;
	double give_up_at;          /* monotonic seconds, 0 = never */
	uint64_t lost;
	off_t base, file_off;       /* regular: where we began, end of whole lines
				       (zstd: frames) written */
	off_t ends[NENDS];          /* regular: offsets just past the last line ends */
	int nends;
	uint64_t nlines;            /* lines in the file since base */
	int dfd;                    /* the file opened again with O_DIRECT, or -1 */
	struct gb_wmode mode;       /* dfd >= 0: buffered or direct, measured */
	bool could_direct;
	uint64_t bytes_direct, bytes_all; /* written (new bytes) each way, all */
	size_t carry;               /* direct: fill[0..carry) is in the file already
				       (written buffered), fill[0] at file_off - carry */

	/* zstd (lines_zstd.c): the writer thread compresses each round into
	 * frames and writes every frame whole. */
	struct gb_zframes *z;       /* NULL: plain lines */
	uint64_t z_pending;         /* (lock) input bytes in the frame in progress */
	bool z_flush;               /* (lock) flush(): end the frame once fill is empty */
	/* the writer thread's own (no lock; finish() after it stopped): */
	long long z_last_ns;        /* when the last frame ended (or the first began) */
	int z_err;                  /* a frame failed: later ones are refused */
	uint64_t z_lost;            /* lines of refused frames, not yet in lost */
	bool z_torn;                /* a pipe holds part of a frame: nothing may follow */
	bool z_summary;             /* the frame being emitted is the summary's */
	long long until_ns;         /* finish(): waits for a pipe end then (0: never) */
	uint64_t z_in;              /* input bytes of the frames written */
	/* finish(): the summary's line (its caller's; zstd: in a frame of its
	 * own, made again at each try) */
	gb_lines_summary_fn summary_fn;
	void *summary_ctx;
};

/* lines_io.c.  The clock in signed nanoseconds (progress_ns is written by
 * the writer thread between our reads: a difference may be negative);
 * buf written without the lock (a pipe: whole lines of at most PIPE_BUF
 * bytes once poll() says it has room; zstd: PIPE_BUF bytes at a time):
 * the bytes written, *err on failure. */
long long gb_lines_mono_ns(void);
size_t gb_lines_write_out(struct gb_lines *w, const char *buf, size_t len, int *err);

/* lines_zstd.c.  Set up w->z (level, workers: 0 = default); 0 or -errno. */
int gb_lines_z__init(struct gb_lines *w, int level, int workers);
/* Lock held: a round of out[0..len), lines lines (the lock is dropped
 * meanwhile). */
void gb_lines_z__round(struct gb_lines *w, const char *out, size_t len, uint64_t lines);
/* Lock held: end the frame in progress when it is due (a second old, or
 * flush() waits for it and the buffer is empty); true when it did. */
bool gb_lines_z__tick(struct gb_lines *w);
/* finish() for zstd, after the writer thread stopped: the frame in
 * progress, the summary (w->summary_fn) in a frame of its own (frames cut
 * from the end of a regular file to make room), the seek table.  0 or
 * -errno. */
int gb_lines_z__finish(struct gb_lines *w, int flushed);
void gb_lines_z__free(struct gb_lines *w);

#endif
