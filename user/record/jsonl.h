/* The trace JSONL writer.  The schema lives here and in docs/trace-format.md,
 * nowhere else.  Format version 1: one object per line, no spaces, fields in
 * a fixed order, hex in lower case with 0x:
 *
 *   {"t":"exec","vcpu":0,"pc":"0x401000","vt":0}
 *   {"t":"read","vcpu":0,"addr":"0x4c6f20","size":8,"pc":"0x401004","vt":1}
 *   {"t":"write","vcpu":0,"addr":"0x7ffe3a10","size":8,"pc":"0x401008","vt":2}
 *   {"t":"fault","vcpu":0,"addr":"0x7f12a000","pc":"0x401008","err":"0x6","vt":2}
 *   {"t":"summary","insns":3,"mem":2,"events":5,"dropped":0,"exec":true,"start":"0x401000","end":"0x401fff"}
 *
 * Budget (the seed's semantics): every line generated counts in "events";
 * once max_events lines are written, further lines are counted in "dropped"
 * instead, and one warning on stderr says so (the vt of the first line
 * dropped, and --max-events 0).  "insns" counts exec lines generated (0 with
 * exec off), "mem" reads + writes generated.  With faults on the summary
 * gains ,"faults":N.
 *
 * Lines go out through record/lines.h (whole lines only, summary last, a
 * writer thread so the tracer never blocks in write(), at least every
 * 250 ms).  A write error (ENOSPC, EPIPE, ...) is sticky: the file is cut
 * back to its last whole line, the summary is still written (lines removed
 * to make room for it, or never written, are counted as dropped), and
 * gb_jsonl__error() reports the errno so the caller can stop.  A stalled
 * output (a FIFO nobody reads) holds the tracer only until SIGINT/SIGTERM or
 * `duration`; gb_jsonl__stalled() tells it.
 */
#ifndef GB_RECORD_JSONL_H
#define GB_RECORD_JSONL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/access.h"

#define GB_DEFAULT_MAX_EVENTS 1000000ull

struct gb_jsonl_opts {
	bool exec;                    /* emit exec lines */
	bool has_start, has_end;      /* range bounds for the summary (null when unset) */
	uint64_t start, end;
	uint64_t max_events;          /* 0 = unlimited */
	bool faults;                  /* summary gains "faults" */
	double duration;              /* --duration: after it a stalled output stops
					 holding the tracer (0 = only on a signal) */
	bool direct;                  /* the fd is gebpf's own file (gb_lines_opts) */
	bool zstd;                    /* zstd frames (gb_lines_opts, record/zframes.h) */
};

struct gb_jsonl_counts {
	uint64_t insns, reads, writes, events, dropped, faults;
	uint64_t regs;                /* regs lines (--values) */
};

struct gb_jsonl;

/* fd is borrowed (not closed).  NULL with errno set. */
struct gb_jsonl *gb_jsonl__new(int fd, const struct gb_jsonl_opts *o);
void gb_jsonl__exec(struct gb_jsonl *w, uint32_t vcpu, uint64_t pc, uint64_t vt);
void gb_jsonl__mem(struct gb_jsonl *w, bool write, uint32_t vcpu, uint64_t addr, uint32_t size,
		   uint64_t pc, uint64_t vt);
/* The exec line (with exec on) and the access lines of one instruction:
 * the same bytes and counts as gb_jsonl__exec and a gb_jsonl__mem per
 * access, made at once in batch mode. */
void gb_jsonl__insn(struct gb_jsonl *w, uint32_t vcpu, uint64_t pc, const struct gb_access *acc,
		    int nacc, uint64_t vt);
/* --values (docs/trace-format.md "Values"): an instruction's lines with
 * what it wrote and accessed.  regs: the exec line's "regs" object as text
 * ("{\"rax\":\"0x1\"}"); vals[k]: access k's value as text ("0x..."),
 * NULL when it could not be read (the line then has no "val").  The same
 * counts and budget as gb_jsonl__insn. */
void gb_jsonl__insn_vals(struct gb_jsonl *w, uint32_t vcpu, uint64_t pc, const char *regs,
			 const struct gb_access *acc, const char *const *vals, int nacc,
			 uint64_t vt);
/* {"t":"regs","vcpu":V,"regs":{...},"vt":N}: a thread's whole register
 * file before instruction vt (regs as above). */
void gb_jsonl__regs(struct gb_jsonl *w, uint32_t vcpu, const char *regs, uint64_t vt);
void gb_jsonl__fault(struct gb_jsonl *w, uint32_t vcpu, uint64_t addr, uint64_t pc, uint64_t err,
		     uint64_t vt);
/* The range the summary shows, once known (a probe-trap range pending
 * until its module is mapped). */
void gb_jsonl__set_range(struct gb_jsonl *w, bool has_start, uint64_t start, bool has_end,
			 uint64_t end);
/* Batch mode on: lines are formatted into a chunk reserved from the writer
 * at once (record/lines.h: the writer waits for it before its next round,
 * so nothing but the line functions may be called until batch mode is off,
 * which hands them over).  For producing
 * many lines in a row (the translating engine's drain).  Same lines, same
 * budget and dropped counts. */
void gb_jsonl__batch(struct gb_jsonl *w, bool on);
/* Write the summary line and flush.  0, or -errno of the first write error. */
int gb_jsonl__finish(struct gb_jsonl *w);
/* Wait until the lines so far are written (e.g. before a snapshot). */
int gb_jsonl__flush(struct gb_jsonl *w);
/* Sticky -errno of the first write error, 0 if none. */
int gb_jsonl__error(const struct gb_jsonl *w);
/* The output took nothing for a second while lines wait (or gave up). */
bool gb_jsonl__stalled(const struct gb_jsonl *w);
/* After finish() failed, for the one error line ("FILE: <this>: N lines
 * dropped"): "the reader stopped reading (pipe full for N s)" (a stalled
 * pipe or FIFO; record/lines.h) or "writing the trace failed: <strerror>". */
const char *gb_jsonl__failure(const struct gb_jsonl *w, char *buf, size_t len);
void gb_jsonl__counts(const struct gb_jsonl *w, struct gb_jsonl_counts *c);
/* max_events lines are written: every line from now on is dropped
 * (always false with max_events 0). */
bool gb_jsonl__full(const struct gb_jsonl *w);
uint64_t gb_jsonl__max_events(const struct gb_jsonl *w);
/* Lines generated but not written, counted by their kind only (the patch
 * trap's counting mode, once the budget is full: docs/trace.md "Counting
 * after the budget"): exec lines (none with exec off, as gb_jsonl__exec),
 * reads, writes; each counts in "events" and "dropped", as a line admitted
 * after the budget would (vt: for the budget's warning, when these are the
 * first lines dropped).  A count may be negative (counts taken back). */
void gb_jsonl__count_more(struct gb_jsonl *w, int64_t exec, int64_t reads, int64_t writes,
			  uint64_t vt);
void gb_jsonl__free(struct gb_jsonl *w);

#endif
