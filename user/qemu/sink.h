/* Where the plugin's trace goes: the lines of docs/trace-format.md, with
 * gebpf's budget and summary (user/record/jsonl.h says the same in gebpf:
 * the two must stay one shape, and tests/e2e/test_qemu_plugin.py checks it).
 *
 * One instruction at a time is handed over whole (its exec line and its
 * accesses), numbered with the next vt.  Every line generated counts in
 * "events"; once max_events lines are written the rest count in "dropped",
 * and one line on stderr says so (as gebpf trace's).
 * "insns" counts exec lines generated (0 with exec off), "mem" reads +
 * writes generated.
 *
 * Lines are formatted into one 8 MiB buffer and written when it fills and at
 * the end (plain), or compressed into zstd frames (user/record/zframes.h)
 * that are written whole.  A write error is sticky: the lines that did not
 * make it and all later ones are counted as dropped, and gb_qsink__finish()
 * returns it.  Not thread-safe: the caller serialises (user/qemu/plugin.c
 * holds its lock). */
#ifndef GB_QEMU_SINK_H
#define GB_QEMU_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gb_qsink_opts {
	bool exec;                 /* exec lines */
	uint64_t max_events;       /* 0 = unlimited */
	bool zstd;                 /* zstd frames instead of plain lines */
};

/* One access of an instruction, as QEMU reported it. */
struct gb_qacc {
	uint64_t addr;
	uint32_t size;
	uint32_t write;
#ifdef GB_QEMU_VALUES
	uint8_t has_val;              /* values=on: QEMU gave its value, */
	uint8_t val[16];              /* little-endian (accesses are 16 bytes at most) */
#endif
};

struct gb_qsink_counts {
	uint64_t insns, mem, events, dropped;
};

struct gb_qsink;

/* fd is owned (closed by __free).  NULL with errno set. */
struct gb_qsink *gb_qsink__new(int fd, const struct gb_qsink_opts *o);
/* The range the summary names (null bounds when never set). */
void gb_qsink__set_range(struct gb_qsink *s, bool has_start, uint64_t start, bool has_end,
			 uint64_t end);
/* One executed instruction of vCPU vcpu at pc with its n accesses. */
void gb_qsink__insn(struct gb_qsink *s, uint32_t vcpu, uint64_t pc, const struct gb_qacc *acc,
		    uint32_t n);
#ifdef GB_QEMU_VALUES
/* values=on (docs/trace-format.md "Values"): the same, each exec line with
 * the "regs" object regs (its text, "{...}"), each access with its "val"
 * where it has one, and first, when file is not NULL, a regs line with the
 * register file file ("{...}") and the instruction's vt.  The regs line
 * counts in events and the budget, not in insns or mem. */
void gb_qsink__insn_vals(struct gb_qsink *s, uint32_t vcpu, uint64_t pc, const char *file,
			 const char *regs, const struct gb_qacc *acc, uint32_t n);
#endif
/* Write the summary and everything before it.  0, or -errno of the first
 * write error. */
int gb_qsink__finish(struct gb_qsink *s);
void gb_qsink__counts(const struct gb_qsink *s, struct gb_qsink_counts *c);
void gb_qsink__free(struct gb_qsink *s);

#endif
