/* The XSAVE area as ptrace and core files carry it (NT_X86_XSTATE): this
 * machine's layout and the conversions to and from the standard one.
 *
 * The kernel's regset uses the non-compacted format with each component at
 * the offset CPUID 0xD enumerates.  Most CPUs enumerate the architectural
 * ("standard") offsets (AVX 576, MPX 960/1024, AVX-512 1088/1152/1664, PKRU
 * 2688), which is what gdb and other readers of a core assume; some
 * hypervisors and AMD parts enumerate others (AVX-512 at 832/896/1408 with
 * no MPX slots).  A snapshot holds the standard layout (so gdb reads it);
 * restoring it converts back to this machine's layout, component by
 * component, keeping those XCR0 enables here (docs/snapshot-format.md,
 * docs/resume.md). */
#ifndef GB_DECODE_XSAVE_H
#define GB_DECODE_XSAVE_H

#include <stddef.h>
#include <stdint.h>

#define GB_XSAVE_HDR     512   /* XSAVE header: XSTATE_BV at +0, XCOMP_BV at +8 */
#define GB_XSAVE_XCR0    464   /* sw_reserved: XCR0 as the kernel saved it */
#define GB_XSAVE_MIN     576   /* legacy region + header */

/* This machine's XCR0 (0 without XSAVE). */
uint64_t gb_xsave_xcr0(void);
/* Offset and size of user component i (2..62) in this machine's
 * non-compacted layout; 0 when XCR0 does not enable it. */
int gb_xsave_comp(unsigned i, uint32_t *off, uint32_t *size);
/* Offset and size of component i in the standard layout; 0 when gebpf does
 * not know a standard place for it. */
int gb_xsave_std_comp(unsigned i, uint32_t *off, uint32_t *size);

/* raw (len bytes, this machine's layout, XCR0 in its sw_reserved bytes) in
 * the standard layout: a new buffer and *outlen, or NULL when raw already is
 * standard or holds a component with no known standard place (keep raw). */
uint8_t *gb_xsave_to_standard(const uint8_t *raw, size_t len, size_t *outlen);

/* A snapshot's area (std, stdlen bytes) written into out (outlen bytes: the
 * kernel's regset size here, normally the thread's current area, whose
 * legacy bytes and sw_reserved are replaced).  Components the snapshot holds
 * (its XSTATE_BV) that this machine does not enable are returned in *lost;
 * components it holds with no known place are in *lost too.  0, or -1 when
 * std is not an XSAVE area (shorter than 576 bytes). */
int gb_xsave_from_standard(const uint8_t *std, size_t stdlen, uint8_t *out, size_t outlen,
			   uint64_t *lost);

#endif
