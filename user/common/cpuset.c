#include "common/cpuset.h"

int gb_cpu_pick(const cpu_set_t *set, int prefer)
{
	if (prefer >= 0 && prefer < CPU_SETSIZE && CPU_ISSET(prefer, set))
		return prefer;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, set))
			return c;
	return -1;
}
