/* Choosing a CPU from an affinity mask (pinning tracer and target). */
#ifndef GB_COMMON_CPUSET_H
#define GB_COMMON_CPUSET_H

#include <sched.h>

/* prefer when it is in set (and >= 0), else the lowest CPU in set; -1 if
 * set is empty. */
int gb_cpu_pick(const cpu_set_t *set, int prefer);

#endif
