/* The page size gebpf works with (x86-64 base pages): one definition. */
#ifndef GB_COMMON_PAGE_H
#define GB_COMMON_PAGE_H

#include <stdint.h>

#define GB_PAGE_SIZE 4096ull
#define GB_PAGE_MASK (GB_PAGE_SIZE - 1)

static inline uint64_t gb_page_down(uint64_t a) { return a & ~GB_PAGE_MASK; }
static inline uint64_t gb_page_up(uint64_t a) { return (a + GB_PAGE_MASK) & ~GB_PAGE_MASK; }

#endif
