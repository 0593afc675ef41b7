/* Small parsing helpers: numbers, address ranges, durations. */
#ifndef GB_COMMON_PARSE_H
#define GB_COMMON_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Tracee addresses are not pointers (rr's remote_ptr). */
typedef uint64_t gb_addr_t;

/* Hex address, with or without 0x.  Returns 0 or -EINVAL. */
int gb_parse_hex(const char *s, uint64_t *out);
/* Unsigned number: decimal, or hex with 0x.  Returns 0, -EINVAL, or
 * -ERANGE when it does not fit in 64 bits. */
int gb_parse_u64(const char *s, uint64_t *out);

/* The longest duration a command takes: its nanoseconds fit in an int64_t
 * (a profile's duration_nanos), about 292 years. */
#define GB_MAX_SECONDS 9223372036.0
/* Non-negative seconds in decimal or float form ("1.5", ".5", "5.", "1e9",
 * "2.5E-1"); no hex, no sign, no blanks, no inf/nan.  Returns 0, -EINVAL, or
 * -ERANGE above GB_MAX_SECONDS (the same bound for every spelling). */
int gb_parse_seconds(const char *s, double *out);

/* The one parser of a duration option (--duration): positive seconds as
 * gb_parse_seconds.  0, or -EINVAL/-ERANGE with one
 * "gebpf: CMD: OPT S: <why>" line printed. */
int gb_parse_duration_opt(const char *cmd, const char *opt, const char *s, double *out);
/* The one parser of a count option (--max-insns, --max-events): as
 * gb_parse_u64, and not 0 when positive.  0, or -EINVAL/-ERANGE with one
 * "gebpf: CMD: OPT S: <why>" line printed ("too large (at most ...)"). */
int gb_parse_count_opt(const char *cmd, const char *opt, const char *s, bool positive,
		       uint64_t *out);
/* The one parser of a period option (--every, --max-age): positive seconds,
 * or a number with a unit s, m, h or d ("10s", "1.5m", "30").  0, or -1
 * with one "gebpf: CMD: OPT S: <why>" line printed. */
int gb_parse_period_opt(const char *cmd, const char *opt, const char *s, double *out);

enum gb_range_kind { GB_RANGE_NONE = 0, GB_RANGE_ADDR, GB_RANGE_SYM };

/* What --range / --start / --end said, before symbols are resolved. */
struct gb_range_spec {
	enum gb_range_kind kind;
	bool has_start, has_end;   /* GB_RANGE_ADDR: either bound may be open */
	uint64_t start, end;       /* inclusive */
	char module[256];          /* GB_RANGE_SYM: "" = any mapped module */
	char symbol[256];
};

/* Parse "START-END" (hex, inclusive), "SYMBOL" or "MODULE:SYMBOL" for
 * command cmd.  0, or -EINVAL with one "gebpf: CMD: --range S: <why>" line
 * printed. */
int gb_range_parse(const char *cmd, const char *s, struct gb_range_spec *out);
/* Text for messages: "0x401000-0x40101f" or "SYMBOL" / "MODULE:SYMBOL". */
void gb_range_describe(const struct gb_range_spec *spec, char *buf, size_t len);
/* "SYMBOL" or "MODULE:SYMBOL" given to option opt: a GB_RANGE_SYM spec.
 * 0, or -EINVAL with one "gebpf: CMD: OPT S: <why>" line printed. */
int gb_sym_spec_parse(const char *cmd, const char *opt, const char *s, struct gb_range_spec *out);
/* Apply --start / --end (hex) to a spec.  0, or -EINVAL with one
 * "gebpf: CMD: --start S: <why>" (or --end) line printed. */
int gb_range_set_bound(const char *cmd, struct gb_range_spec *spec, bool is_end, const char *s);

#endif
