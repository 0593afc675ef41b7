/* Reading a trace from anywhere: a path, `-` (stdin), /dev/stdin or a pipe,
 * a recording directory (its meta.json names the trace blob and the
 * binary).  The input is read once; its format is sniffed from the first
 * bytes in the buffer:
 *
 *   7f 45 4c 46   an ELF file (a snapshot): nothing is decoded here, the
 *                 caller loads it by path (gb_treader__format() says so)
 *   28 b5 2f fd   zstd: decompressed as a stream (libzstd's
 *                 ZSTD_decompressStream) over any number of concatenated
 *                 frames; skippable frames (magic 0x184D2A50..5F, a seek
 *                 table) are skipped.  A truncated last frame (a killed
 *                 trace) yields every complete line before its cut and one
 *                 warning, not an error.
 *   else          plain JSONL
 *
 * Lines are handed out without their '\n' (and '\r'); empty lines are
 * skipped.  docs/trace-format.md is the line format; docs/diff.md and
 * docs/show.md say what reads through here.
 */
#ifndef GB_RECORD_TREADER_H
#define GB_RECORD_TREADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum gb_tformat { GB_TFORMAT_JSONL = 0, GB_TFORMAT_ZSTD, GB_TFORMAT_ELF };

struct gb_treader;

struct gb_treader_stats {
	uint64_t raw_bytes;      /* bytes read from the input (compressed) */
	uint64_t bytes;          /* bytes of JSONL handed out or skipped */
	uint64_t frames;         /* zstd frames (data) */
	uint64_t skippable;      /* zstd skippable frames (seek table) */
	bool truncated;          /* the last zstd frame was cut */
};

enum {
	/* Keep what is read in memory when the input cannot be read twice (a
	 * pipe, stdin): gb_treader__rewind() then replays it. */
	GB_TREADER_REWIND = 1u << 0,
};

/* 0, or -errno with one "gebpf: <who>: PATH: <why>" line printed. */
int gb_treader__open(const char *path, unsigned flags, const char *who, struct gb_treader **out);
enum gb_tformat gb_treader__format(const struct gb_treader *r);
/* The name to print: the path as given ("(stdin)" for -), or DIR/<blob>. */
const char *gb_treader__name(const struct gb_treader *r);
/* True when the input is a file that can be opened again by its path (an
 * ELF snapshot then loads through that path). */
bool gb_treader__reopenable(const struct gb_treader *r);
/* The next line: 1 (*line, *len; valid until the next call), 0 at the end,
 * -errno on an error (printed). */
int gb_treader__next(struct gb_treader *r, const char **line, size_t *len);
/* 1-based number of the line last returned. */
long gb_treader__lineno(const struct gb_treader *r);
/* Back to the first line (the file again, or what was kept with
 * GB_TREADER_REWIND).  0 or -errno (printed). */
int gb_treader__rewind(struct gb_treader *r);
void gb_treader__stats(const struct gb_treader *r, struct gb_treader_stats *st);
/* From a recording directory's meta.json: the traced binary ("exe", else
 * command[0]; resolved against the directory's parent when relative and
 * not found as given) and /proc/PID/maps text ("maps"), or NULL. */
const char *gb_treader__binary(const struct gb_treader *r);
const char *gb_treader__maps(const struct gb_treader *r);
void gb_treader__free(struct gb_treader *r);

#endif
