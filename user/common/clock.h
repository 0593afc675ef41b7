/* The monotonic clock in seconds (a vDSO read: cheap enough for every loop
 * turn), for durations and rates. */
#ifndef GB_COMMON_CLOCK_H
#define GB_COMMON_CLOCK_H

#include <time.h>

static inline double gb_mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif
