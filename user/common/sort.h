/* Comparators for qsort(3) and bsearch(3). */
#ifndef GB_COMMON_SORT_H
#define GB_COMMON_SORT_H

#include <stdint.h>

/* Two uint64_t, ascending. */
static inline int gb_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

#endif
