/* The monotonic clock in seconds (a vDSO read: cheap enough for every loop
 * turn), for durations and rates. */
#ifndef GB_COMMON_CLOCK_H
#define GB_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline double gb_mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The same clock in nanoseconds (the clock BPF's bpf_ktime_get_ns() counts
 * in: sample times compare with it). */
static inline uint64_t gb_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
