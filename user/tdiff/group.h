/* A trace as a stream of instruction groups (docs/diff.md): an exec line
 * and the access and fault lines of the same instruction (same vcpu, pc and
 * vt) that follow it; access lines without an exec line (--exec off) group
 * the same way; any other line (summary, an unknown "t") is a group of its
 * own.  Normalisation (norm.h) works on groups as they stream by
 * (stream.h), so memory stays bounded by one group whatever the trace's
 * length. */
#ifndef GB_TDIFF_GROUP_H
#define GB_TDIFF_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "record/tline.h"

struct gb_trec {
	struct gb_tline l;    /* (its val and regs pointers NULL: see below) */
	long lineno;
	char *raw;            /* the line as read: summary and other lines only */
	char *val, *regs;     /* --values: the line's "val" digits and "regs"
			       * object, owned; NULL when absent */
};

/* x's owned strings freed / duplicated (-ENOMEM, nothing owned, on failure). */
void gb_trec_release(struct gb_trec *x);
int gb_trec_dup(struct gb_trec *x);

struct gb_tgroup {
	struct gb_trec *r;
	size_t n, cap;
	uint64_t recno;       /* 0-based index of its first record in the stream */
};

/* Group storage helpers. */
int gb_tgroup_push(struct gb_tgroup *g, const struct gb_trec *x);
void gb_tgroup_clear(struct gb_tgroup *g);   /* n = 0, raw lines freed */
void gb_tgroup_free(struct gb_tgroup *g);
int gb_tgroup_copy(struct gb_tgroup *dst, const struct gb_tgroup *src);
/* The group is an instruction (exec or access lines), not a lone line. */
bool gb_tgroup_is_insn(const struct gb_tgroup *g);
size_t gb_tgroup_accesses(const struct gb_tgroup *g);

#endif
