#include "common/page.h"

#include <string.h>

bool gb_page_is_zero(const uint8_t *p)
{
	static const uint8_t zeros[GB_PAGE_SIZE];
	return !memcmp(p, zeros, GB_PAGE_SIZE);
}
