/* The one way to grow an array.  Running out of memory is never silent:
 * gb_grow() prints "gebpf: out of memory (...)" and returns -ENOMEM, and
 * the caller must propagate it (an item that cannot be stored is an error,
 * not something to drop).
 *
 *   if (GB_GROW(&v, &cap, n + 1))
 *           return -ENOMEM;
 *   v[n++] = item;
 */
#ifndef GB_COMMON_GROW_H
#define GB_COMMON_GROW_H

#include <stddef.h>

/* Make room for at least need elements of size elem in *arr (capacity
 * *cap, doubled, at least 16).  0, or -ENOMEM with *arr and *cap unchanged. */
int gb_grow(void **arr, size_t *cap, size_t need, size_t elem);

#define GB_GROW(arrp, capp, need) gb_grow((void **)(arrp), (capp), (need), sizeof(**(arrp)))

#endif
