/* The per-CPU "counters" map every gebpf BPF object shares (slots: enum
 * gb_counter in bpf/gebpf_events.h). */
#ifndef GB_PROBE_COUNTERS_H
#define GB_PROBE_COUNTERS_H

#include <stdint.h>

/* The slot summed over every possible CPU (0 if the map cannot be read). */
uint64_t gb_counter_sum(int counters_fd, uint32_t slot);

#endif
