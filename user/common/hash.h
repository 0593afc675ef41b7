/* FNV-1a, 64 bits: the hash gebpf's tables and caches key by (profile and
 * flame-graph names, a process's maps text, a BPF object's bytes).  Not for
 * anything an adversary chooses to collide. */
#ifndef GB_COMMON_HASH_H
#define GB_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

#define GB_FNV1A_INIT 1469598103934665603ULL

/* Continue hash h (GB_FNV1A_INIT to start) over n bytes at p. */
static inline uint64_t gb_fnv1a(const void *p, size_t n, uint64_t h)
{
	const unsigned char *s = p;
	while (n--)
		h = (h ^ *s++) * 1099511628211ULL;
	return h;
}

/* ... over a NUL-terminated string. */
static inline uint64_t gb_fnv1a_str(const char *s)
{
	uint64_t h = GB_FNV1A_INIT;
	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return h;
}

#endif
