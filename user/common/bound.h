/* The one binary search: arrays sorted by a uint64_t key (a field of each
 * element, or the elements themselves).
 *
 *   size_t i = GB_UPPER(maps, n, start, addr);      // first start > addr
 *   if (i && addr < maps[i - 1].end) ... maps[i - 1] holds addr
 *   size_t j = GB_LOWER(probes, n, addr, a);         // first addr >= a
 */
#ifndef GB_COMMON_BOUND_H
#define GB_COMMON_BOUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Index of the first of n elements (size bytes each, key at byte off) whose
 * key is > x (upper) or >= x (!upper); n when there is none. */
static inline size_t gb_bound(const void *base, size_t n, size_t size, size_t off, uint64_t x,
			      bool upper)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t k;
		memcpy(&k, (const char *)base + mid * size + off, sizeof(k));
		if (upper ? k <= x : k < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* (The key must be a uint64_t: the array size is -1, a compile error, if not.) */
#define GB_BOUND_(arr, n, field, x, upper)                                               \
	(gb_bound((arr), (n), sizeof(*(arr)), offsetof(__typeof__(*(arr)), field), (x), (upper)) + \
	 0 * sizeof(char[sizeof((arr)->field) == sizeof(uint64_t) ? 1 : -1]))
/* First element whose field is > x / >= x (n: none). */
#define GB_UPPER(arr, n, field, x) GB_BOUND_(arr, n, field, x, true)
#define GB_LOWER(arr, n, field, x) GB_BOUND_(arr, n, field, x, false)
/* The same over an array of uint64_t. */
#define GB_UPPER_U64(arr, n, x) gb_bound((arr), (n), sizeof(uint64_t), 0, (x), true)
#define GB_LOWER_U64(arr, n, x) gb_bound((arr), (n), sizeof(uint64_t), 0, (x), false)

#endif
