/* `gebpf sample` JSONL output (the format is documented in docs/sample.md):
 *
 *   {"t":"sample","vcpu":CPU,"tid":N,"pid":N,"comm":"name","pc":"0x401136","ns":N}
 *   {"t":"fault","vcpu":CPU,"tid":N,"addr":"0x7f12a000","pc":"0x401008","err":"0x6","ns":N}
 *   {"t":"summary","seen":S,"kept":K,"filtered":F,"filtered_pid":P,"filtered_range":R,
 *    "lost":L,"event":"cpu-clock","hz":999,"start":"0x..","end":"0x.."[,"faults":N,"faults_lost":M]
 *    [,"unwritten":U]}
 *
 * No spaces, fields in exactly this order, hex in lower case with 0x and no
 * leading zeros (as the trace format).  "vcpu" is the CPU the event happened
 * on, "ns" CLOCK_MONOTONIC nanoseconds.  start/end are null without a range.
 *
 * Writer discipline (the trace writer's, user/record/jsonl.h): lines are
 * buffered and written whole; on a write error (ENOSPC, EPIPE, ...) the file
 * is cut back to its last whole line, later lines are counted, not written,
 * and the summary is still written last, removing whole lines from the end
 * to make room for it; "unwritten" then counts every line not in the file.
 */
#ifndef GB_SAMPLE_JSONL_H
#define GB_SAMPLE_JSONL_H

#include <stdbool.h>
#include <stdint.h>

#include "probe/faults.h"
#include "probe/sampler.h"

struct gb_sample_out;

/* fd is borrowed (not closed).  NULL on ENOMEM. */
struct gb_sample_out *gb_sample_out__new(int fd);
void gb_sample_out__sample(struct gb_sample_out *w, const struct gb_sample *s);
void gb_sample_out__fault(struct gb_sample_out *w, const struct gb_fault *x);
/* Write buffered lines now (at most a second's worth stays buffered). */
int gb_sample_out__flush(struct gb_sample_out *w);

struct gb_sample_summary {
	struct gb_sampler_stats st;
	const char *event;
	uint64_t hz;
	bool has_range;
	uint64_t start, end;
	bool faults;
};
/* Write the summary line last.  0, or -errno of the first write error. */
int gb_sample_out__finish(struct gb_sample_out *w, const struct gb_sample_summary *s);
void gb_sample_out__free(struct gb_sample_out *w);

#endif
