/* The page size gebpf works with (x86-64 base pages): GB_PAGE_SIZE is
 * defined once, in the kernel/user contract header (the BPF programs use it
 * too); the helpers for user space are here. */
#ifndef GB_COMMON_PAGE_H
#define GB_COMMON_PAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "gebpf_events.h"

#define GB_PAGE_MASK (GB_PAGE_SIZE - 1)

static inline uint64_t gb_page_down(uint64_t a) { return a & ~GB_PAGE_MASK; }
static inline uint64_t gb_page_up(uint64_t a) { return (a + GB_PAGE_MASK) & ~GB_PAGE_MASK; }

/* The GB_PAGE_SIZE bytes at p are all zero (p needs no alignment). */
bool gb_page_is_zero(const uint8_t *p);

#endif
