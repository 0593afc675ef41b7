/* The trace writers' number formatting and line counting, header-only and
 * self-contained (libc only) so that the QEMU plugin (user/qemu/sink.c)
 * compiles the same code as gebpf's own writer (record/jsonl.c, lines.c,
 * zframes.c): the trace format's hex is lower case with 0x and no leading
 * zeros (docs/trace-format.md). */
#ifndef GB_RECORD_NUMFMT_H
#define GB_RECORD_NUMFMT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* "0x1f" at buf (no NUL); the number of bytes written (3..18). */
static inline int gb_numfmt_hex(char *buf, uint64_t v)
{
	static const char pairs[] =
		"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
		"202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
		"404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
		"606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
		"808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
		"a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
		"c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
		"e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";
	int n = v ? (67 - __builtin_clzll(v)) / 4 : 1;
	char *p = buf + 2 + n;
	buf[0] = '0';
	buf[1] = 'x';
	for (; v >= 16; v >>= 8) { /* two digits at a time */
		p -= 2;
		memcpy(p, pairs + (v & 255) * 2, 2);
	}
	if (p > buf + 2)
		*--p = "0123456789abcdef"[v];
	return n + 2;
}

/* The n bytes at b as one little-endian unsigned integer, "0x..." at buf
 * in the same style (no leading zeros, "0x0" for zero; --values, any
 * width: an xmm register is 16 bytes, an xsave area thousands); the
 * number of bytes written (at most 2 + 2n, 3 for n 0). */
static inline int gb_numfmt_hexle(char *buf, const uint8_t *b, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	while (n && !b[n - 1])
		n--;
	char *p = buf;
	*p++ = '0';
	*p++ = 'x';
	if (!n) {
		*p++ = '0';
		return 3;
	}
	if (b[n - 1] >= 16)
		*p++ = digits[b[n - 1] >> 4];
	*p++ = digits[b[n - 1] & 15];
	for (size_t k = n - 1; k-- > 0;) {
		*p++ = digits[b[k] >> 4];
		*p++ = digits[b[k] & 15];
	}
	return (int)(p - buf);
}

/* v in decimal at buf (no NUL); the number of bytes written (1..20). */
static inline int gb_numfmt_dec(char *buf, uint64_t v)
{
	static const char pairs[] =
		"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
		"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
		"8081828384858687888990919293949596979899";
	static const uint64_t pow10[19] = {
		10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull, 100000000ull,
		1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
		10000000000000ull, 100000000000000ull, 1000000000000000ull,
		10000000000000000ull, 100000000000000000ull, 1000000000000000000ull,
		10000000000000000000ull };
	int n = 1;
	while (n < 20 && v >= pow10[n - 1])
		n++;
	char *p = buf + n;
	while (v >= 100) {
		unsigned k = (unsigned)(v % 100) * 2;
		v /= 100;
		*--p = pairs[k + 1];
		*--p = pairs[k];
	}
	if (v >= 10) {
		*--p = pairs[v * 2 + 1];
		*--p = pairs[v * 2];
	} else {
		*--p = (char)('0' + v);
	}
	return n;
}

/* Newlines in p[0..n): 16 bytes at a time, each match a byte of -1
 * subtracted into a byte accumulator summed every 255 rounds (a memchr per
 * line was a tenth of the trace writer's time under the patch trap's ~4 M
 * lines/s; x86-64 without -mpopcnt has no cheap popcount). */
static inline uint64_t gb_numfmt_lines(const char *p, size_t n)
{
	uint64_t k = 0;
	size_t i = 0;
#ifdef __SSE2__
	const __m128i nl = _mm_set1_epi8('\n'), zero = _mm_setzero_si128();
	while (i + 16 <= n) {
		size_t end = n - i > 16 * 255 ? i + 16 * 255 : n;
		__m128i acc = zero;
		for (; i + 16 <= end; i += 16) {
			__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
			acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(v, nl));
		}
		__m128i s = _mm_sad_epu8(acc, zero);
		k += (uint64_t)_mm_cvtsi128_si64(s) + (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(s, s));
	}
#endif
	for (; i < n; i++)
		k += p[i] == '\n';
	return k;
}

/* A decimal counter for a line's vt: its digits kept as 16 ASCII bytes in
 * two words (most significant first, in memory order), so that the next
 * value's digits come from the last ones by word arithmetic in registers and
 * go out by two 8-byte stores.  (Incrementing the digits byte by byte in
 * memory and copying them out wide made every instruction's line wait for
 * the narrow stores to reach the cache: a store does not forward into a
 * wider load; that wait was a tenth of the patch trap's drain.) */
struct gb_numfmt_ctr {
	uint64_t a, b;       /* the digits' bytes 0..7 and 8..15 (then garbage) */
	uint64_t v;          /* the value they spell */
	unsigned n;          /* how many (1..16); 0: none yet, or v >= 1e16 */
};

/* c's digits become v + 1's; false when they cannot (all nines: one more
 * digit; or none yet). */
static inline int gb_numfmt_ctr_inc(struct gb_numfmt_ctr *c)
{
	typedef unsigned __int128 u128;
	if (!c->n)
		return 0;
	unsigned i = c->n - 1; /* the last digit: 9 times in 10 the only one that changes */
	uint64_t *last = i < 8 ? &c->a : &c->b;
	if ((*last >> 8 * (i & 7) & 0xff) != '9') {
		*last += 1ull << 8 * (i & 7);
		c->v++;
		return 1;
	}
	const u128 ones = ((u128)0x0101010101010101ull << 64) | 0x0101010101010101ull;
	unsigned sh = 8 * (16 - c->n);
	u128 m = ~(u128)0 << sh; /* the digits' bytes */
	/* big-endian: the first digit in the top byte, the last at sh */
	u128 x = ((u128)__builtin_bswap64(c->a) << 64) | __builtin_bswap64(c->b);
	u128 d = (x & m) - (ones * 0x30 & m);       /* each byte 0..9 */
	d += ones * 0xf6 & m;                        /* 0xf6..0xff: a 9 carries */
	d += (u128)1 << sh;
	if (!(d >> 120))
		return 0;                            /* 99..9 + 1: a digit more */
	d -= ((d & ones * 0x80) >> 7) * 0xf6;        /* uncarried bytes back to 0..9 */
	d |= ones * 0x30 & m;
	c->a = __builtin_bswap64((uint64_t)(d >> 64));
	c->b = __builtin_bswap64((uint64_t)d);
	c->v++;
	return 1;
}

/* c spells v (any v: at 1e16 and above n is 0 and gb_numfmt_ctr_put
 * formats it each time). */
static inline void gb_numfmt_ctr_set(struct gb_numfmt_ctr *c, uint64_t v)
{
	char s[24];
	memset(s, 0, sizeof(s));
	int n = gb_numfmt_dec(s, v);
	memcpy(&c->a, s, 8);
	memcpy(&c->b, s + 8, 8);
	c->v = v;
	c->n = n <= 16 ? (unsigned)n : 0;
}

/* v's digits at p from c (made v's first: one more than the last is the
 * fast way); 16 bytes of room past p needed (24 for v >= 1e16).  The
 * number of digits. */
static inline int gb_numfmt_ctr_put(struct gb_numfmt_ctr *c, char *p, uint64_t v)
{
	if (!(c->n && v == c->v) && !(c->n && v == c->v + 1 && gb_numfmt_ctr_inc(c)))
		gb_numfmt_ctr_set(c, v);
	if (!c->n)
		return gb_numfmt_dec(p, v);
	memcpy(p, &c->a, 8);
	memcpy(p + 8, &c->b, 8);
	return (int)c->n;
}

#endif
