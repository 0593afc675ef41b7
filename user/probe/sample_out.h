/* `gebpf sample` JSONL lines (the format is documented in docs/sample.md):
 *
 *   {"t":"sample","vcpu":CPU,"tid":N,"pc":"0x401136","ns":N}
 *   {"t":"fault","vcpu":CPU,"tid":N,"addr":"0x7f12a000","pc":"0x401008","err":"0x6","ns":N}
 *   {"t":"summary","seen":S,"kept":K,"filtered":F,"filtered_pid":P,"filtered_range":R,
 *    "lost":L,"event":"cpu-clock","hz":999,"start":"0x..","end":"0x.."[,"faults":N,"faults_lost":M]}
 *
 * No spaces, fields in exactly this order, hex in lower case with 0x and no
 * leading zeros (as the trace format).  "vcpu" is the CPU the event happened
 * on, "ns" CLOCK_MONOTONIC nanoseconds.  start/end are null without a range.
 */
#ifndef GB_PROBE_SAMPLE_OUT_H
#define GB_PROBE_SAMPLE_OUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "probe/faults.h"
#include "probe/sampler.h"

void gb_sample_out_sample(FILE *f, const struct gb_sample *s);
void gb_sample_out_fault(FILE *f, const struct gb_fault *x);

struct gb_sample_summary {
	struct gb_sampler_stats st;
	const char *event;
	uint64_t hz;
	bool has_range;
	uint64_t start, end;
	bool faults;
};
void gb_sample_out_summary(FILE *f, const struct gb_sample_summary *s);

#endif
