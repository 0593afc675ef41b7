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
#include <stdlib.h>

#include "decode/plan.h"
#include "decode/xsave.h"

#include <string.h>

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

uint64_t gb_xsave_xcr0(void)
{
	pthread_once(&layout_once, layout_probe);
	return layout.xcr0;
}

int gb_xsave_comp(unsigned i, uint32_t *off, uint32_t *size)
{
	pthread_once(&layout_once, layout_probe);
	if (i < 2 || i >= 63 || !((layout.xcr0 >> i) & 1) || !layout.size[i])
		return 0;
	*off = layout.offset[i];
	*size = layout.size[i];
	return 1;
}

/* The architectural offsets of the user components gdb and kernel cores on
 * common hardware use (Intel SDM vol. 1, 13.4.3; the kernel's
 * xstate_offsets on such CPUs). */
static const struct { uint32_t off, size; } std_layout[10] = {
	[2] = { 576, 256 }, [3] = { 960, 64 }, [4] = { 1024, 64 }, [5] = { 1088, 64 },
	[6] = { 1152, 512 }, [7] = { 1664, 1024 }, [9] = { 2688, 8 },
};

int gb_xsave_std_comp(unsigned i, uint32_t *off, uint32_t *size)
{
	if (i < 2 || i >= 10 || !std_layout[i].size)
		return 0;
	*off = std_layout[i].off;
	*size = std_layout[i].size;
	return 1;
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

uint8_t *gb_xsave_to_standard(const uint8_t *raw, size_t len, size_t *outlen)
{
	if (len < GB_XSAVE_MIN)
		return NULL;
	uint64_t xcr0 = rd64(raw + GB_XSAVE_XCR0);
	int same = 1;
	size_t need = GB_XSAVE_MIN;
	uint32_t off, size, soff, ssize;
	for (unsigned i = 2; i < 64; i++) {
		if (!((xcr0 >> i) & 1))
			continue;
		if (!gb_xsave_comp(i, &off, &size) || !gb_xsave_std_comp(i, &soff, &ssize) ||
		    size != ssize)
			return NULL; /* a component we do not know the standard place of */
		if (off != soff)
			same = 0;
		if (soff + ssize > need)
			need = soff + ssize;
	}
	if (same)
		return NULL;
	uint8_t *std = calloc(1, need);
	if (!std)
		return NULL;
	memcpy(std, raw, GB_XSAVE_MIN);
	for (unsigned i = 2; i < 64; i++)
		if (((xcr0 >> i) & 1) && gb_xsave_comp(i, &off, &size) &&
		    gb_xsave_std_comp(i, &soff, &ssize) && off + size <= len)
			memcpy(std + soff, raw + off, size);
	*outlen = need;
	return std;
}

int gb_xsave_from_standard(const uint8_t *std, size_t stdlen, uint8_t *out, size_t outlen,
			   uint64_t *lost)
{
	*lost = 0;
	if (stdlen < GB_XSAVE_MIN || outlen < GB_XSAVE_MIN)
		return -1;
	uint64_t here = gb_xsave_xcr0();
	uint64_t bv = rd64(std + GB_XSAVE_HDR);
	uint32_t off, size, soff, ssize;
	/* A capture on a machine with a component that has no standard place
	 * keeps that machine's own layout (gb_xsave_to_standard): the same
	 * XCR0 and size here is the same layout. */
	if (rd64(std + GB_XSAVE_XCR0) == here && stdlen == outlen)
		for (unsigned i = 2; i < 64; i++)
			if (((here >> i) & 1) && !gb_xsave_std_comp(i, &soff, &ssize)) {
				memcpy(out, std, outlen);
				return 0;
			}
	/* Legacy region (x87, MXCSR, xmm0-15) as saved; the sw_reserved bytes
	 * stay this kernel's (they describe this machine's area). */
	memcpy(out, std, GB_XSAVE_XCR0);
	uint64_t keep = bv & 3;
	for (unsigned i = 2; i < 64; i++) {
		if (!((bv >> i) & 1))
			continue;
		if (!gb_xsave_std_comp(i, &soff, &ssize) || soff + ssize > stdlen ||
		    !((here >> i) & 1) || !gb_xsave_comp(i, &off, &size) || size != ssize ||
		    off + size > outlen) {
			*lost |= 1ull << i;
			continue;
		}
		memcpy(out + off, std + soff, size);
		keep |= 1ull << i;
	}
	/* Header: the components restored; non-compacted (XCOMP_BV 0) and the
	 * reserved bytes zero, as the kernel requires of a user area. */
	memset(out + GB_XSAVE_HDR, 0, 64);
	memcpy(out + GB_XSAVE_HDR, &keep, 8);
	return 0;
}
