/* A memory access of an instruction: what the decoder computes, the
 * engines record and the trace writer makes a read or write line of. */
#ifndef GB_COMMON_ACCESS_H
#define GB_COMMON_ACCESS_H

#include <stdbool.h>
#include <stdint.h>

struct gb_access {
	uint64_t addr;
	uint32_t size;    /* bytes, full architectural operand size */
	bool write;
};

#endif
