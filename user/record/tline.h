/* One trace line read back (docs/trace-format.md): the fields the readers
 * (gebpf diff, gebpf show) use.  The writer is jsonl.c. */
#ifndef GB_RECORD_TLINE_H
#define GB_RECORD_TLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum gb_tline_type {
	GB_TL_OTHER = 0,   /* a JSON object with a "t" this reader does not know */
	GB_TL_EXEC,
	GB_TL_READ,
	GB_TL_WRITE,
	GB_TL_FAULT,
	GB_TL_SUMMARY,
	GB_TL_REGS,        /* --values: a thread's register file */
	GB_TL_NTYPES
};

struct gb_tline {
	uint8_t type;          /* enum gb_tline_type */
	bool has_err;
	int64_t vcpu, size, vt;   /* -1 when absent */
	uint64_t addr, pc, err;   /* 0 when absent */
	/* --values (docs/trace-format.md "Values"): the text of "val" (the hex
	 * digits' string, without quotes) and of the "regs" object ("{...}"),
	 * pointing into the line parsed (valid while it is); NULL when absent
	 * (or in a line only cJSON could read). */
	const char *val, *regs;
	uint32_t val_len, regs_len;
};

/* 0, or -EINVAL when s is not a JSON object with a string "t".  Lines in
 * the writer's shape (a flat object, no escapes) are parsed by hand; any
 * other JSON object goes through cJSON. */
int gb_tline_parse(const char *s, size_t len, struct gb_tline *out);

static inline bool gb_tline_is_access(const struct gb_tline *l)
{
	return l->type == GB_TL_READ || l->type == GB_TL_WRITE;
}

extern const char *const gb_tline_names[GB_TL_NTYPES];   /* "other", "exec", ... */

#endif
