/* Accesses that depend on vector and opmask registers: VSIB gathers and
 * scatters, masked loads/stores (AVX-512 {k}, vmaskmov, maskmovdqu) and
 * compress/expand.  Rule (docs/decoder.md): one access per active element,
 * in element order; no access for inactive elements. */
#include <errno.h>
#include <string.h>

#include "decode/decode.h"
#include "decode/plan.h"

/* Sign bit of element i (size bytes) of vector register v. */
static bool sign_bit(const struct gb_vec *vec, unsigned v, unsigned i, unsigned size)
{
	return vec->zmm[v & 31][i * size + size - 1] & 0x80;
}

static int64_t index_elem(const struct gb_vec *vec, unsigned v, unsigned i, unsigned size)
{
	const uint8_t *p = &vec->zmm[v & 31][i * size];

	if (size == 4) {
		int32_t x;
		memcpy(&x, p, sizeof(x));
		return x;
	} else {
		int64_t x;
		memcpy(&x, p, sizeof(x));
		return x;
	}
}

static int vsib(const struct gb_plan *p, const struct gb_cpu *cpu, struct gb_access *out, int max)
{
	const struct gb_memref *r = &p->refs[0];
	const struct gb_vec *vec = cpu->vec;
	uint64_t k = p->kreg ? vec->k[p->kreg & 7] : 0;
	int n = 0;

	for (unsigned i = 0; i < p->nelem && n >= 0; i++) {
		bool on = p->kreg ? (k >> i) & 1 : sign_bit(vec, p->mreg, i, p->elem);
		if (!on)
			continue;
		int64_t adj = index_elem(vec, p->vreg, i, p->idx_elem) * r->scale;
		n = gb_emit(out, n, max, gb_ref_addr(r, cpu, adj), p->elem, r->flags & GB_REF_WRITE);
	}
	return n;
}

static bool elem_active(const struct gb_plan *p, const struct gb_vec *vec, uint64_t k, unsigned j)
{
	uint64_t lanes = p->lanes >= 64 ? ~0ull : (1ull << p->lanes) - 1;

	switch (p->map) {
	case GB_MAP_SIGN:
		return sign_bit(vec, p->mreg, j, p->elem);
	case GB_MAP_DIRECT:
		return (k >> j) & 1;
	case GB_MAP_GROUP:
		return (k >> (j / (p->nelem / p->lanes))) & 1;
	case GB_MAP_SPREAD: {
		unsigned g = p->lanes / p->nelem;
		uint64_t grp = g >= 64 ? ~0ull : (1ull << g) - 1;
		return (k >> (j * g)) & grp;
	}
	case GB_MAP_BCAST:
		for (unsigned i = j; i < 64; i += p->nelem)
			if ((lanes >> i) & (k >> i) & 1)
				return true;
		return false;
	default:
		return true;
	}
}

static int masked(const struct gb_plan *p, const struct gb_cpu *cpu, struct gb_access *out, int max)
{
	const struct gb_memref *r = &p->refs[0];
	const struct gb_vec *vec = cpu->vec;
	uint64_t k = p->kreg ? vec->k[p->kreg & 7] : ~0ull;
	int n = 0;

	for (unsigned j = 0; j < p->nelem && n >= 0; j++)
		if (elem_active(p, vec, k, j))
			n = gb_emit(out, n, max, gb_ref_addr(r, cpu, (int64_t)j * p->elem), p->elem,
				 r->flags & GB_REF_WRITE);
	return n;
}

uint64_t gb_plan_kmask_elems(const struct gb_plan *p, uint64_t k)
{
	uint64_t lanes = p->lanes >= 64 ? ~0ull : (1ull << p->lanes) - 1, out = 0;

	if (p->kind == GB_PLAN_COMPRESS) {
		unsigned cnt = __builtin_popcountll(k & lanes);
		return cnt >= 64 ? ~0ull : (1ull << cnt) - 1;
	}
	for (unsigned j = 0; j < p->nelem && j < 64; j++)
		if (p->map != GB_MAP_SIGN && elem_active(p, NULL, k, j))
			out |= 1ull << j;
	return out;
}

/* vpcompress stores / vpexpand loads the active elements contiguously. */
static int compress(const struct gb_plan *p, const struct gb_cpu *cpu, struct gb_access *out, int max)
{
	const struct gb_memref *r = &p->refs[0];
	uint64_t lanes = p->lanes >= 64 ? ~0ull : (1ull << p->lanes) - 1;
	unsigned cnt = __builtin_popcountll(cpu->vec->k[p->kreg & 7] & lanes);

	if (!cnt)
		return 0;
	return gb_emit(out, 0, max, gb_ref_addr(r, cpu, 0), cnt * p->elem, r->flags & GB_REF_WRITE);
}

int gb_vec_accesses(const struct gb_insn *insn, const struct gb_cpu *cpu,
		    struct gb_access *out, int max)
{
	const struct gb_plan *p = &insn->plan;

	if (!cpu->vec)
		return -EINVAL;
	switch (p->kind) {
	case GB_PLAN_VSIB:
		return vsib(p, cpu, out, max);
	case GB_PLAN_MASKED:
		return masked(p, cpu, out, max);
	case GB_PLAN_COMPRESS:
		return compress(p, cpu, out, max);
	default:
		return -EINVAL;
	}
}
