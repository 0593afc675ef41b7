/* Progress on stderr while tracing (only when stderr is a terminal). */
#ifndef GB_TRACE_PROGRESS_H
#define GB_TRACE_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#include "record/jsonl.h"

struct gb_progress {
	bool on, shown;
	double last;             /* gb_mono_s() of the last line */
	uint64_t last_events;
};

void gb_progress_init(struct gb_progress *p);
void gb_progress_tick(struct gb_progress *p, const struct gb_jsonl *out, uint64_t vt);
void gb_progress_done(struct gb_progress *p);

#endif
