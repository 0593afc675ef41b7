/* Relocating the instructions an entry's patch covers: see reloc.h. */
#include "jit/reloc.h"

#include <errno.h>
#include <string.h>

enum rkind { R_COPY, R_JMP, R_JCC, R_LOOP, R_CALL, R_CALL_IND, R_NO };

#define ABS_LEN 14   /* jmp qword [rip+0]; dq target */
#define PUSH_LEN 6   /* push qword [rip+disp32] */

/* The target of a relative branch (a relative immediate), or false. */
static bool rel_target(const struct gb_insn *gi, uint64_t *target)
{
	for (unsigned k = 0; k < gi->zi.operand_count; k++) {
		const ZydisDecodedOperand *o = &gi->ops[k];
		if (o->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && o->imm.is_relative) {
			*target = gi->pc + gi->len + (uint64_t)o->imm.value.s;
			return true;
		}
	}
	return false;
}

static enum rkind kind(const struct gb_insn *gi, uint64_t *target)
{
	const ZydisDecodedInstruction *z = &gi->zi;
	bool rel = rel_target(gi, target);
	if (z->meta.category != ZYDIS_CATEGORY_CALL && !rel)
		return R_COPY; /* (an indirect jmp, a ret: the same from anywhere) */
	if (z->meta.branch_type == ZYDIS_BRANCH_TYPE_FAR || z->operand_width != 64)
		return R_NO;
	if (z->meta.category == ZYDIS_CATEGORY_CALL)
		return rel ? R_CALL : R_CALL_IND;
	if (z->opcode_map == ZYDIS_OPCODE_MAP_DEFAULT) {
		if (z->opcode == 0xe9 || z->opcode == 0xeb)
			return R_JMP;
		if ((z->opcode & 0xf0) == 0x70)
			return R_JCC;
		if (z->opcode >= 0xe0 && z->opcode <= 0xe3 && z->raw.imm[0].size == 8 &&
		    z->raw.imm[0].offset == gi->len - 1)
			return R_LOOP; /* loopne, loope, loop, jrcxz/jecxz */
	} else if (z->opcode_map == ZYDIS_OPCODE_MAP_0F && (z->opcode & 0xf0) == 0x80) {
		return R_JCC;
	}
	return R_NO; /* xbegin and the like */
}

/* Memory operands a copy can address from anywhere in [lo, hi]. */
static bool mem_ok(const struct gb_insn *gi, uint64_t lo, uint64_t hi)
{
	for (unsigned k = 0; k < gi->zi.operand_count; k++) {
		const ZydisDecodedOperand *o = &gi->ops[k];
		if (o->type != ZYDIS_OPERAND_TYPE_MEMORY)
			continue;
		if (o->mem.base == ZYDIS_REGISTER_EIP)
			return false;
		if (o->mem.base == ZYDIS_REGISTER_RIP &&
		    !gb_emit_reach32(lo, hi, gi->pc + gi->len + (uint64_t)o->mem.disp.value))
			return false;
	}
	return true;
}

/* The index of the covered instruction at t, -1 when t is outside them,
 * -2 when it is inside one. */
static int inner(const struct gb_insn *in, unsigned n, uint64_t t)
{
	if (t < in[0].pc || t >= in[n - 1].pc + in[n - 1].len)
		return -1;
	for (unsigned j = 0; j < n; j++)
		if (in[j].pc == t)
			return (int)j;
	return -2;
}

bool gb_reloc_ok(const struct gb_insn *in, unsigned n, uint64_t lo, uint64_t hi)
{
	if (!n || n > GB_RELOC_MAX)
		return false;
	for (unsigned k = 0; k < n; k++) {
		const struct gb_insn *gi = &in[k];
		uint64_t t = 0;
		enum rkind r = kind(gi, &t);
		if (r == R_NO || (k && gi->pc != in[k - 1].pc + in[k - 1].len) || !mem_ok(gi, lo, hi))
			return false;
		if (r != R_COPY && r != R_CALL_IND && inner(in, n, t) == -2)
			return false;
		if (r == R_CALL_IND) {
			const ZydisDecodedOperand *o = &gi->ops[0];
			if ((o->type == ZYDIS_OPERAND_TYPE_REGISTER && o->reg.value == ZYDIS_REGISTER_RSP) ||
			    (o->type == ZYDIS_OPERAND_TYPE_MEMORY &&
			     (o->mem.segment == ZYDIS_REGISTER_FS || o->mem.segment == ZYDIS_REGISTER_GS ||
			      (o->mem.base == ZYDIS_REGISTER_RSP && o->mem.disp.value > INT32_MAX - 8))))
				return false;
		}
	}
	return true;
}

struct fix { size_t off; unsigned j; };

static void piece(struct gb_reloc *out, const struct gb_emit *m, uint64_t pc, uint8_t rsp_up)
{
	if (out->n < GB_RELOC_PIECES)
		out->p[out->n++] = (struct gb_reloc_piece){ (uint32_t)m->used, rsp_up, pc };
}

static void raw64(struct gb_emit *m, uint64_t v) { gb_emit_raw(m, (const uint8_t *)&v, 8); }

/* jmp qword [rip+0]; dq t (j >= 0: the copy of in[j], filled in later). */
static void abs_jump(struct gb_emit *m, uint64_t t, int j, struct fix *fx, unsigned *nfx)
{
	static const uint8_t JMP_RIP0[] = { 0xff, 0x25, 0, 0, 0, 0 };
	gb_emit_raw(m, JMP_RIP0, sizeof(JMP_RIP0));
	if (j >= 0)
		fx[(*nfx)++] = (struct fix){ m->used, (unsigned)j };
	raw64(m, t);
}

int gb_reloc_emit(struct gb_emit *m, const struct gb_insn *in, unsigned n, struct gb_reloc *out)
{
	struct fix fx[GB_RELOC_MAX];
	uint64_t at[GB_RELOC_MAX];
	unsigned nfx = 0;
	out->n = 0;
	if (n > GB_RELOC_MAX)
		return m->err = -EINVAL;
	for (unsigned k = 0; k < n; k++) {
		const struct gb_insn *gi = &in[k];
		uint64_t t = 0, next = gi->pc + gi->len;
		enum rkind r = kind(gi, &t);
		int j = inner(in, n, t);
		at[k] = gb_emit_here(m);
		piece(out, m, gi->pc, 0);
		switch (r) {
		case R_COPY:
			gb_emit_moved(m, gi);
			break;
		case R_JMP:
			abs_jump(m, t, j, fx, &nfx);
			break;
		case R_JCC: { /* the inverted condition over the jump */
			const uint8_t b[] = { (uint8_t)(0x70 | ((gi->zi.opcode & 0xf) ^ 1)), ABS_LEN };
			gb_emit_raw(m, b, sizeof(b));
			piece(out, m, t, 0);
			abs_jump(m, t, j, fx, &nfx);
			break;
		}
		case R_LOOP: { /* taken: over the jump past the taken path */
			static const uint8_t SKIP[] = { 0xeb, ABS_LEN };
			uint8_t b[GB_INSN_MAX_LEN];
			memcpy(b, gi->bytes, gi->len);
			b[gi->len - 1] = sizeof(SKIP);
			gb_emit_raw(m, b, gi->len);
			piece(out, m, next, 0);
			gb_emit_raw(m, SKIP, sizeof(SKIP));
			piece(out, m, t, 0);
			abs_jump(m, t, j, fx, &nfx);
			break;
		}
		case R_CALL:
		case R_CALL_IND: { /* the original return address pushed, then the jump */
			uint8_t push[PUSH_LEN] = { 0xff, 0x35 };
			size_t p = m->used;
			gb_emit_raw(m, push, sizeof(push));
			piece(out, m, gi->pc, 8);
			if (r == R_CALL)
				abs_jump(m, t, j, fx, &nfx);
			else
				gb_emit_jmp_target(m, gi, 8);
			int32_t disp = (int32_t)(m->used - (p + PUSH_LEN));
			if (!m->err)
				memcpy(m->buf + p + 2, &disp, 4);
			raw64(m, next);
			break;
		}
		default:
			m->err = m->err ? m->err : -EINVAL;
			break;
		}
	}
	uint64_t end = in[n - 1].pc + in[n - 1].len;
	piece(out, m, end, 0);
	abs_jump(m, end, -1, fx, &nfx);
	for (unsigned f = 0; !m->err && f < nfx; f++)
		memcpy(m->buf + fx[f].off, &at[fx[f].j], 8);
	return m->err;
}
