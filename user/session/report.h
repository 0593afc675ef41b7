/* The -v lines that close a trace (docs/trace.md "What -v says"): the
 * counters of what ran, and only of that. */
#ifndef GB_SESSION_REPORT_H
#define GB_SESSION_REPORT_H

#include <stdbool.h>

#include "trace/engine.h"

/* es: the engine's counters; trap: the entry trap's name; jit: the
 * translating engine of the probe and page traps ran the owner's stretches
 * (not the patch trap's cache, which says its own counters at its end). */
void gb_trace_report(const struct gb_engine_stats *es, const char *trap, bool jit);

#endif
