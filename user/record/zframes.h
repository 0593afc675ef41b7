/* Lines into zstd frames, with a seek table at the end (the compressed form
 * of a trace: docs/trace-format.md "Compressed traces").
 *
 * Self-contained: libc and libzstd only, no other gebpf header, so a QEMU
 * plugin can compile this file in.
 *
 * The output is a sequence of independent zstd frames (each with its content
 * checksum) followed by one seek table in zstd's seekable format
 * (contrib/seekable_format/zstd_seekable_compression_format.md): a skippable
 * frame (magic 0x184D2A5E, a 4-byte frame size) holding one entry per frame,
 * { u32 compressed size, u32 decompressed size }, then the footer
 * { u32 number of frames, u8 descriptor (0: no checksums), u32 magic
 * 0x8F92EAB1 }, all little endian.  `zstd -d` / `zstdcat` skip the table and
 * print the lines; a reader that wants frame k seeks by the table.
 *
 * Frames:
 *  - a frame holds whole lines only: the caller hands whole lines (each
 *    ending in '\n') to gb_zframes__write(), and a frame ends only between
 *    two lines;
 *  - a frame ends after the first line end at or past frame_bytes of input
 *    (4 MiB by default), or when the caller says so (gb_zframes__end_frame:
 *    the trace writer does every second when lines come slowly, and before
 *    the summary so that it is a frame of its own);
 *  - nothing is handed out before a frame is complete: emit() gets each
 *    complete frame at once, with the number of lines and input bytes it
 *    holds (struct gb_zframe).  A writer that writes each frame whole leaves
 *    a file every completed frame of which decompresses, whatever kills it;
 *  - emit() returns 0 when the frame is now in the output (it enters the
 *    seek table), or a negative errno when it is not (the frame is not
 *    entered, and the error is returned by the call that ended the frame).
 *
 * One thread at a time per struct gb_zframes.
 */
#ifndef GB_RECORD_ZFRAMES_H
#define GB_RECORD_ZFRAMES_H

#include <stddef.h>
#include <stdint.h>

#define GB_ZFRAMES_FRAME_BYTES (4u << 20) /* input per frame, by default */
#define GB_ZFRAMES_LEVEL 1                /* the default compression level */
#define GB_ZFRAMES_SEEK_MAGIC 0x8F92EAB1u
#define GB_ZFRAMES_SKIP_MAGIC 0x184D2A5Eu

struct gb_zframe {
	const void *data;      /* the complete frame: size bytes */
	size_t size;
	uint64_t in_bytes;     /* the input (decompressed) bytes it holds */
	uint64_t lines;        /* ... and the lines (its '\n's) */
	int seek_table;        /* 1: this is the seek table (in_bytes = lines = 0) */
};

/* 0: the frame is in the output; -errno: it is not. */
typedef int (*gb_zframes_emit_fn)(void *ctx, const struct gb_zframe *f);

struct gb_zframes_opts {
	int level;             /* zstd level; 0 = GB_ZFRAMES_LEVEL */
	size_t frame_bytes;    /* 0 = GB_ZFRAMES_FRAME_BYTES; at most 1 GiB */
	int workers;           /* zstd's nbWorkers (0: compress in the caller) */
};

struct gb_zframes;

/* NULL with errno set (ENOMEM, or EINVAL for a level or worker count libzstd
 * refuses). */
struct gb_zframes *gb_zframes__new(const struct gb_zframes_opts *o, gb_zframes_emit_fn emit,
				   void *ctx);
/* Compress buf[0..len) (whole lines), emitting every frame it completes.
 * 0, or the first error of emit() (the frames after the failed one are still
 * compressed and emitted: the caller decides whether to go on), or -EIO when
 * libzstd failed (then the object is unusable). */
int gb_zframes__write(struct gb_zframes *z, const void *buf, size_t len);
/* The same, buf holding lines lines (its '\n's: counted once by the caller,
 * not again here; UINT64_MAX: count them). */
int gb_zframes__write_n(struct gb_zframes *z, const void *buf, size_t len, uint64_t lines);
/* End the frame in progress (nothing when it holds no input).  0 or as
 * gb_zframes__write(). */
int gb_zframes__end_frame(struct gb_zframes *z);
/* Input bytes in the frame in progress (0: none). */
uint64_t gb_zframes__pending(const struct gb_zframes *z);
/* Take the last frame entered back out of the seek table (the caller cut it
 * from its output, e.g. to make room for a summary on a full disk).  Fills
 * *f (data NULL) and returns 0, or -ENOENT when there is none. */
int gb_zframes__drop_last(struct gb_zframes *z, struct gb_zframe *f);
/* End the frame in progress, then emit the seek table of the frames in the
 * output.  0 or the error of either. */
int gb_zframes__finish(struct gb_zframes *z);
/* Frames entered, and their total compressed and input bytes and lines. */
struct gb_zframes_totals {
	uint64_t frames, out_bytes, in_bytes, lines;
};
void gb_zframes__totals(const struct gb_zframes *z, struct gb_zframes_totals *t);
void gb_zframes__free(struct gb_zframes *z);

#endif
