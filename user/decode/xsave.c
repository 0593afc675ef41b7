/* The XSAVE area layout of this machine: CPUID leaf 0xD (per-component size,
 * standard-format offset, 64-byte alignment in the compacted format) and
 * XCR0 (xgetbv 0).  The tracee runs on the same machine under the same
 * kernel, so its XCR0 is ours.  Read once (pthread_once): it is a constant of
 * the hardware, not program state.
 *
 * Extent of an xsave-family access, with RFBM = XCR0 & EDX:EAX:
 *   standard  (xsave, xsaveopt, xrstor):  max(576, max over i>=2 in RFBM of
 *             offset[i] + size[i])
 *   compacted (xsavec, xsaves, xrstors):  576, then for each i>=2 in RFBM in
 *             order: align to 64 if CPUID says so, add size[i]
 * 576 = the 512-byte legacy region + the 64-byte XSAVE header, which every
 * form touches.  Supervisor components (IA32_XSS) are not counted: xsaves
 * and xrstors fault in user mode. */
#include <cpuid.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "decode/plan.h"

#define XSAVE_LEGACY_AND_HEADER 576

struct xsave_layout {
	uint64_t xcr0;
	uint64_t align64;         /* bit i: component i is 64-byte aligned when compacted */
	uint32_t offset[64];
	uint32_t size[64];
};

static struct xsave_layout layout;
static pthread_once_t layout_once = PTHREAD_ONCE_INIT;

static void layout_probe(void)
{
	unsigned a, b, c, d;
	uint32_t lo, hi;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
		return;   /* no XSAVE: xcr0 stays 0, every extent is 576 */
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	layout.xcr0 = ((uint64_t)hi << 32) | lo;
	for (unsigned i = 2; i < 63; i++) {
		if (!((layout.xcr0 >> i) & 1))
			continue;
		__cpuid_count(0xd, i, a, b, c, d);
		layout.size[i] = a;
		layout.offset[i] = b;
		if (c & 2)
			layout.align64 |= 1ull << i;
	}
}

uint32_t gb_xsave_extent(uint64_t rfbm, int compacted)
{
	uint32_t end = XSAVE_LEGACY_AND_HEADER;

	pthread_once(&layout_once, layout_probe);
	rfbm &= layout.xcr0;
	for (unsigned i = 2; i < 63; i++) {
		if (!((rfbm >> i) & 1))
			continue;
		if (compacted) {
			if ((layout.align64 >> i) & 1)
				end = (end + 63) & ~63u;
			end += layout.size[i];
		} else if (layout.offset[i] + layout.size[i] > end) {
			end = layout.offset[i] + layout.size[i];
		}
	}
	return end;
}
