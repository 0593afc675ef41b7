/* --normalise qemu|lackey: undo the emulator quirks docs/testing.md
 * ("Emulator deviations") lists that need no decoder, on both sides, one
 * instruction group at a time (docs/diff.md says which rule does what):
 *
 *   qemu:   accesses wider than 8 bytes split into contiguous 8-byte pieces
 *           (QEMU 10: 16-byte ones; the last one shorter: x87's 10 bytes
 *           come as 8 + 2) are merged back; an SMC store logged twice is kept once.
 *   lackey: the extra exec without accesses when a REP loop ends (an exec
 *           with no accesses right after an exec of the same pc that had
 *           some) is dropped; the double read of a locked RMW / xchg (two
 *           identical consecutive reads) is kept once.
 *   both:   CMPS: QEMU and lackey read ES:(RDI) before DS:(RSI), hardware
 *           and gebpf the other way round; a trace has no registers, so an
 *           instruction whose accesses are exactly two reads of one size
 *           (1, 2, 4, 8) gets them in address order, on both sides.
 *           Summary lines are left out (their counts differ by
 *           construction) and vt is renumbered (exec lines 0, 1, 2, ...).
 */
#ifndef GB_TDIFF_NORM_H
#define GB_TDIFF_NORM_H

#include <stdbool.h>
#include <stdint.h>

enum gb_norm { GB_NORM_NONE = 0, GB_NORM_QEMU, GB_NORM_LACKEY };

enum gb_norm_rule {
	GB_RULE_SPLIT,       /* qemu: 8-byte pieces merged */
	GB_RULE_SMC,         /* qemu: duplicate store dropped */
	GB_RULE_REP_EXEC,    /* lackey: REP loop's extra exec dropped */
	GB_RULE_LOCK_READ,   /* lackey: duplicate locked read dropped */
	GB_RULE_CMPS,        /* both: a two-read pair put in address order */
	GB_RULE_SUMMARY,     /* both: summary line left out */
	GB_RULE_N
};

struct gb_norm_counts {
	uint64_t n[GB_RULE_N];   /* records each rule changed (or dropped) */
};

struct gb_tgroup;

/* Per-stream state of the rules that look at the previous group. */
struct gb_norm_state {
	bool prev_exec_with_access;
	uint64_t prev_pc;
	int64_t prev_vcpu;
	int64_t vt;              /* renumbering: the last exec's new vt */
};

/* Which rules run under norm. */
bool gb_norm_rule_on(enum gb_norm norm, enum gb_norm_rule rule);
/* Short name ("split16") and what it undoes, for reports. */
const char *gb_norm_rule_name(enum gb_norm_rule rule);
const char *gb_norm_rule_what(enum gb_norm_rule rule);
const char *gb_norm_name(enum gb_norm norm);

/* Apply the rules of norm to the group g in place; false when the whole
 * group is dropped.  st may be NULL (no previous group, no renumbering):
 * the hint finder applies single rules to a pair of groups that way. */
bool gb_norm_group(enum gb_norm norm, struct gb_tgroup *g, struct gb_norm_state *st,
		   struct gb_norm_counts *c);
/* One in-group rule alone (SPLIT, SMC, LOCK_READ or CMPS), no state: the
 * number of records it changed. */
unsigned gb_norm_apply_rule(enum gb_norm_rule rule, struct gb_tgroup *g);

#endif
