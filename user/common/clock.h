/* The one reader of CLOCK_MONOTONIC (durations, deadlines, the clock BPF's
 * bpf_ktime_get_ns() counts in). */
#ifndef GB_COMMON_CLOCK_H
#define GB_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC now, in nanoseconds. */
static inline uint64_t gb_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The same in seconds (durations printed or compared with a limit). */
static inline double gb_mono_s(void)
{
	return (double)gb_mono_ns() / 1e9;
}

#endif
