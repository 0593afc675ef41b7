/* The translator's unit tests (test_jit*.c): a code cache mapped in this
 * process within reach of the test code, and a fetch that decodes this
 * process's own memory. */
#ifndef TESTS_UNIT_JIT_UTIL_H
#define TESTS_UNIT_JIT_UTIL_H

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdint.h>
#include <asm/prctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "decode/decode.h"
#include "jit/jit.h"
#include "jit/patch.h"

static inline const struct gb_insn *jit_fetch(void *ctx, uint64_t pc)
{
	static __thread struct gb_insn in[64];
	static __thread unsigned k;
	(void)ctx;
	struct gb_insn *out = &in[k++ % 64];
	return gb_decode(pc, (const uint8_t *)pc, GB_INSN_MAX_LEN, out) ? NULL : out;
}

/* The instructions of b[0..n) as if at pc, at most max of them. */
static inline size_t jit_decode_all(uint64_t pc, const uint8_t *b, size_t n, struct gb_insn *out,
				    size_t max)
{
	size_t k = 0;
	for (size_t off = 0; off < n && k < max; k++) {
		cr_assert_eq(gb_decode(pc + off, b + off, n - off, &out[k]), 0, "bytes +%zu", off);
		off += out[k].len;
	}
	return k;
}

/* A cache (code + data, read/write/exec here) near code at near_code;
 * shared: MAP_SHARED, so that a forked child runs in the same cache. */
static inline struct gb_jit_mem jit_map_near_as(uint64_t near_code, bool shared)
{
	uint64_t near = (near_code & ~0xfffffull) + (256ull << 20);
	void *p = MAP_FAILED;
	for (int k = 0; k < 64 && p == MAP_FAILED; k++, near += 64ull << 20)
		p = mmap((void *)near, GB_JIT_SIZE, PROT_READ | PROT_WRITE | PROT_EXEC,
			 (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			 -1, 0);
	cr_assert_neq(p, MAP_FAILED, "no room for a code cache near the test code");
	return (struct gb_jit_mem){ p, (uint8_t *)p + GB_JIT_CODE_SIZE, (uint64_t)p,
				    (uint64_t)p + GB_JIT_CODE_SIZE };
}

static inline struct gb_jit_mem jit_map_near(uint64_t near_code)
{
	return jit_map_near_as(near_code, false);
}

/* This process's code [lo, hi) made writable (for patching it in place);
 * its pages as the planner sees them: r-x, as the file maps them. */
static inline struct gb_patch_map jit_text_rwx(uint64_t lo, uint64_t hi)
{
	uint64_t pg = lo & ~0xfffull, pg_end = (hi + 0xfff) & ~0xfffull;
	cr_assert_eq(mprotect((void *)pg, pg_end - pg, PROT_READ | PROT_WRITE | PROT_EXEC), 0);
	return (struct gb_patch_map){ pg, pg_end, false };
}

/* A stop-free translator over [lo, end) with this thread's gs base its
 * area 0 (as gebpf sets every thread's); the writer waits timeout_ms for
 * the ring's consumer. */
static inline struct gb_jit *jit_open_nostop(const struct gb_jit_mem *mem, const void *lo,
					     const void *end, uint32_t timeout_ms)
{
	struct gb_jit_opts o = { .nostop = true, .ring_timeout_ms = timeout_ms };
	struct gb_jit *j = gb_jit__new_opts(mem, (uint64_t)lo, (uint64_t)end - 1, &o);
	cr_assert_not_null(j);
	cr_assert_eq(syscall(SYS_arch_prctl, ARCH_SET_GS, gb_jit__tls(j, 0)), 0);
	return j;
}

#endif
