/* The -v lines that close a trace: report.h. */
#include "session/report.h"

#include <stdio.h>

#include "common/log.h"

void gb_trace_report(const struct gb_engine_stats *es, const char *trap, bool jit)
{
	char steps[48] = "", more[160] = "";
	if (jit)
		gb_info("trace: jit: %llu runs, %llu stops, %llu instructions translated-run, "
			"%llu blocks", (unsigned long long)es->jit_runs,
			(unsigned long long)es->jit_stops, (unsigned long long)es->jit_insns,
			(unsigned long long)es->jit_blocks);
	/* The step engine's counters when it ran: under the patch trap only
	 * for an image the patch trap left to another trap. */
	if (es->steps || es->decodes || es->native_handlers) {
		snprintf(steps, sizeof(steps), "%llu single-steps, ", (unsigned long long)es->steps);
		snprintf(more, sizeof(more), ", %llu decodes, %llu re-validated, %llu signal "
			 "handlers run natively", (unsigned long long)es->decodes,
			 (unsigned long long)es->revalidations,
			 (unsigned long long)es->native_handlers);
	}
	gb_info("trace: %s trap: %s%llu in-range instructions, %llu range entries%s", trap, steps,
		(unsigned long long)es->in_range, (unsigned long long)es->entries, more);
}
