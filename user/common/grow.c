#include "common/grow.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/log.h"

int gb_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 16;
	while (n < need && n <= SIZE_MAX / 2)
		n *= 2;
	if (n < need)
		n = need;
	void *v = n <= SIZE_MAX / elem ? realloc(*arr, n * elem) : NULL;
	if (!v) {
		gb_err("out of memory (growing an array to %zu items of %zu bytes)", n, elem);
		return -ENOMEM;
	}
	*arr = v;
	*cap = n;
	return 0;
}
