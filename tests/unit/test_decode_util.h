/* Shared by the decoder's Criterion tables (tests/unit/test_decode*.c).
 *
 * A case is: instruction bytes (assembled with GNU as; the text is the
 * case name), register overrides on top of a fixed base state, optional
 * vector/opmask contents, and the exact access list expected, in order.
 * A table is one test (DCASE_TEST): every case is checked in the one
 * process, each failing case reported by its name (a process per case, as a
 * parameterized test makes, cost the sanitizer pass ~0.3 CPU s a case:
 * docs/testing.md "How scripts/test runs the suite"). */
#ifndef GB_TEST_DECODE_UTIL_H
#define GB_TEST_DECODE_UTIL_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "decode/decode.h"

/* The base register state every case starts from. */
#define PC     0x401000ull
#define RAX    0x1000ull
#define RBX    0x2000ull
#define RCX    0x10ull
#define RDX    0x4000ull
#define RSI    0x5000ull
#define RDI    0x6000ull
#define RBP    0x7ffe0100ull
#define RSP    0x7ffe0000ull
#define R8     0x8000ull
#define FSBASE 0x100000ull
#define GSBASE 0x200000ull
#define DF     0x400ull

struct reg_set {
	uint16_t off1;   /* offsetof(struct gb_cpu, reg) + 1; 0 = unused */
	uint64_t val;
};

/* Elements of one vector register (esize 0 = unused slot). */
struct vec_init {
	uint8_t reg, esize;
	int64_t v[16];
};

struct dcase {
	char name[64];
	uint8_t bytes[GB_INSN_MAX_LEN + 1];
	uint8_t len;
	struct reg_set set[4];
	bool use_vec;
	struct vec_init vi[3];
	uint64_t k[8];
	uint32_t flags;     /* must be set */
	uint32_t noflags;   /* must be clear */
	int n;
	struct gb_access exp[20];
};

#define SET(reg, v) { offsetof(struct gb_cpu, reg) + 1, (uint64_t)(v) }
#define VI(r, es, ...) { (r), (es), __VA_ARGS__ }
#define R(a, s) { (uint64_t)(a), (s), false }
#define W(a, s) { (uint64_t)(a), (s), true }

static inline void dcase_cpu(const struct dcase *c, struct gb_cpu *cpu, struct gb_vec *vec)
{
	memset(cpu, 0, sizeof(*cpu));
	cpu->rax = RAX; cpu->rbx = RBX; cpu->rcx = RCX; cpu->rdx = RDX;
	cpu->rsi = RSI; cpu->rdi = RDI; cpu->rbp = RBP; cpu->rsp = RSP;
	cpu->r8 = R8; cpu->r9 = 0x9000; cpu->r10 = 0xa000; cpu->r11 = 0xb000;
	cpu->r12 = 0xc000; cpu->r13 = 0xd000; cpu->r14 = 0xe000; cpu->r15 = 0xf000;
	cpu->rip = PC; cpu->rflags = 0x202; cpu->fs_base = FSBASE; cpu->gs_base = GSBASE;
	for (int i = 0; i < 4; i++)
		if (c->set[i].off1)
			memcpy((char *)cpu + c->set[i].off1 - 1, &c->set[i].val, sizeof(uint64_t));
	memset(vec, 0, sizeof(*vec));
	for (int i = 0; i < 3; i++) {
		const struct vec_init *vi = &c->vi[i];
		for (int e = 0; vi->esize && e < 16 && (e + 1) * vi->esize <= 64; e++)
			memcpy(&vec->zmm[vi->reg][e * vi->esize], &vi->v[e], vi->esize);
	}
	memcpy(vec->k, c->k, sizeof(vec->k));
	cpu->vec = c->use_vec ? vec : NULL;
}

static inline void dcase_list(const struct gb_access *a, int n, char *buf, size_t len)
{
	size_t o = 0;

	buf[0] = 0;
	for (int i = 0; i < n && o < len; i++)
		o += snprintf(buf + o, len - o, " %c:0x%llx/%u", a[i].write ? 'W' : 'R',
			      (unsigned long long)a[i].addr, a[i].size);
}

/* A failed check of case C: reported (non-fatal: the table's other cases
 * are still checked), and the case's checks stop. */
#define DCASE_EXPECT(cond, ...)                 \
	do {                                    \
		if (!(cond)) {                  \
			cr_expect(cond, __VA_ARGS__); \
			return false;           \
		}                               \
	} while (0)

/* Decode the case's bytes and compare flags and accesses with the table;
 * false (and reported) when they differ. */
static inline bool dcase_check(const struct dcase *c)
{
	struct gb_insn in;
	struct gb_cpu cpu;
	struct gb_vec vec;
	struct gb_access acc[GB_MAX_ACCESSES];
	char got[2048], want[2048];
	int n;

	dcase_cpu(c, &cpu, &vec);
	DCASE_EXPECT(gb_decode(PC, c->bytes, c->len, &in) == 0, "%s: decode failed", c->name);
	DCASE_EXPECT(in.len == c->len, "%s: length %u, expected %u", c->name, in.len, c->len);
	DCASE_EXPECT((in.flags & c->flags) == c->flags, "%s: flags 0x%x lack 0x%x", c->name,
		     in.flags, c->flags);
	DCASE_EXPECT((in.flags & c->noflags) == 0, "%s: flags 0x%x should not have 0x%x", c->name,
		     in.flags, c->noflags);
	DCASE_EXPECT(!!(in.flags & GB_INSN_NEEDS_VEC) == c->use_vec,
		     "%s: NEEDS_VEC is %d", c->name, !!(in.flags & GB_INSN_NEEDS_VEC));
	n = gb_insn_accesses(&in, &cpu, acc, GB_MAX_ACCESSES);
	dcase_list(acc, n > 0 ? n : 0, got, sizeof(got));
	dcase_list(c->exp, c->n, want, sizeof(want));
	DCASE_EXPECT(n == c->n, "%s: %d accesses [%s ], expected %d [%s ]", c->name, n, got,
		     c->n, want);
	for (int i = 0; i < n; i++)
		DCASE_EXPECT(acc[i].addr == c->exp[i].addr && acc[i].size == c->exp[i].size &&
			     acc[i].write == c->exp[i].write,
			     "%s: access %d differs: got [%s ], expected [%s ]", c->name, i, got, want);
	return true;
}

/* Test(SUITE, NAME) checking every case of TABLE (an array of struct dcase),
 * and that the table was not empty. */
#define DCASE_TEST(suite, name, table)                                            \
	Test(suite, name)                                                         \
	{                                                                         \
		size_t n = sizeof(table) / sizeof((table)[0]), bad = 0;           \
		for (size_t i = 0; i < n; i++)                                    \
			bad += !dcase_check(&(table)[i]);                         \
		cr_expect(n > 0 && bad == 0, "%zu of %zu cases failed", bad, n); \
	}

#endif
