/* Encoding for the code cache: see emit.h. */
#include "jit/emit.h"

#include <errno.h>
#include <string.h>

#include "decode/plan.h"

ZydisRegister gb_emit_reg(unsigned r)
{
	static const ZydisRegister z[GB_REG_COUNT] = {
		ZYDIS_REGISTER_RAX, ZYDIS_REGISTER_RBX, ZYDIS_REGISTER_RCX, ZYDIS_REGISTER_RDX,
		ZYDIS_REGISTER_RSI, ZYDIS_REGISTER_RDI, ZYDIS_REGISTER_RBP, ZYDIS_REGISTER_RSP,
		ZYDIS_REGISTER_R8,  ZYDIS_REGISTER_R9,  ZYDIS_REGISTER_R10, ZYDIS_REGISTER_R11,
		ZYDIS_REGISTER_R12, ZYDIS_REGISTER_R13, ZYDIS_REGISTER_R14, ZYDIS_REGISTER_R15,
	};
	return r < GB_REG_COUNT ? z[r] : ZYDIS_REGISTER_NONE;
}

static void req_init(ZydisEncoderRequest *q, ZydisMnemonic mn, unsigned nops)
{
	memset(q, 0, sizeof(*q));
	q->machine_mode = ZYDIS_MACHINE_MODE_LONG_64;
	q->mnemonic = mn;
	q->operand_count = (ZyanU8)nops;
}

static void op_reg(ZydisEncoderOperand *o, ZydisRegister r)
{
	o->type = ZYDIS_OPERAND_TYPE_REGISTER;
	o->reg.value = r;
}

static void op_mem(ZydisEncoderOperand *o, ZydisRegister base, ZydisRegister index, uint8_t scale,
		   int64_t disp, uint16_t size)
{
	o->type = ZYDIS_OPERAND_TYPE_MEMORY;
	o->mem.base = base;
	o->mem.index = index;
	o->mem.scale = index == ZYDIS_REGISTER_NONE ? 0 : scale;
	o->mem.displacement = disp;
	o->mem.size = size;
}

static void op_imm(ZydisEncoderOperand *o, int64_t v)
{
	o->type = ZYDIS_OPERAND_TYPE_IMMEDIATE;
	o->imm.s = v;
}

static size_t encode(struct gb_emit *m, ZydisEncoderRequest *q)
{
	if (m->err)
		return 0;
	ZyanUSize len = m->size - m->used;
	if (len < ZYDIS_MAX_INSTRUCTION_LENGTH) {
		m->err = -ENOSPC;
		return 0;
	}
	if (!ZYAN_SUCCESS(ZydisEncoderEncodeInstructionAbsolute(q, m->buf + m->used, &len,
								 gb_emit_here(m)))) {
		m->err = -EINVAL;
		return 0;
	}
	m->used += len;
	return len;
}

void gb_emit_store(struct gb_emit *m, uint64_t slot, unsigned r)
{
	ZydisEncoderRequest q;
	req_init(&q, ZYDIS_MNEMONIC_MOV, 2);
	op_mem(&q.operands[0], ZYDIS_REGISTER_RIP, ZYDIS_REGISTER_NONE, 0, (int64_t)slot, 8);
	op_reg(&q.operands[1], gb_emit_reg(r));
	encode(m, &q);
}

void gb_emit_store_vec(struct gb_emit *m, unsigned base, int32_t disp, unsigned v, unsigned bytes)
{
	ZydisEncoderRequest q;
	req_init(&q, bytes > 16 ? ZYDIS_MNEMONIC_VMOVDQU : ZYDIS_MNEMONIC_MOVDQU, 2);
	op_mem(&q.operands[0], gb_emit_reg(base), ZYDIS_REGISTER_NONE, 0, disp, bytes > 16 ? 32 : 16);
	op_reg(&q.operands[1], (ZydisRegister)((bytes > 16 ? ZYDIS_REGISTER_YMM0 : ZYDIS_REGISTER_XMM0) + v));
	encode(m, &q);
}

void gb_emit_kmov(struct gb_emit *m, unsigned r, unsigned k, bool wide)
{
	ZydisEncoderRequest q;
	req_init(&q, wide ? ZYDIS_MNEMONIC_KMOVQ : ZYDIS_MNEMONIC_KMOVW, 2);
	op_reg(&q.operands[0], wide ? gb_emit_reg(r) : ZydisRegisterEncode(ZYDIS_REGCLASS_GPR32,
						 ZydisRegisterGetId(gb_emit_reg(r))));
	op_reg(&q.operands[1], (ZydisRegister)(ZYDIS_REGISTER_K0 + (k & 7)));
	encode(m, &q);
}

void gb_emit_load(struct gb_emit *m, unsigned r, uint64_t slot)
{
	ZydisEncoderRequest q;
	req_init(&q, ZYDIS_MNEMONIC_MOV, 2);
	op_reg(&q.operands[0], gb_emit_reg(r));
	op_mem(&q.operands[1], ZYDIS_REGISTER_RIP, ZYDIS_REGISTER_NONE, 0, (int64_t)slot, 8);
	encode(m, &q);
}

void gb_emit_store_imm(struct gb_emit *m, unsigned base, int32_t disp, int32_t imm)
{
	ZydisEncoderRequest q;
	req_init(&q, ZYDIS_MNEMONIC_MOV, 2);
	op_mem(&q.operands[0], gb_emit_reg(base), ZYDIS_REGISTER_NONE, 0, disp, 8);
	op_imm(&q.operands[1], imm);
	encode(m, &q);
}

void gb_emit_store_reg(struct gb_emit *m, unsigned base, int32_t disp, unsigned r)
{
	ZydisEncoderRequest q;
	req_init(&q, ZYDIS_MNEMONIC_MOV, 2);
	op_mem(&q.operands[0], gb_emit_reg(base), ZYDIS_REGISTER_NONE, 0, disp, 8);
	op_reg(&q.operands[1], gb_emit_reg(r));
	encode(m, &q);
}

void gb_emit_lea(struct gb_emit *m, unsigned r, unsigned base, unsigned index, uint8_t scale,
		 int64_t disp)
{
	ZydisEncoderRequest q;
	req_init(&q, ZYDIS_MNEMONIC_LEA, 2);
	op_reg(&q.operands[0], gb_emit_reg(r));
	op_mem(&q.operands[1], gb_emit_reg(base), gb_emit_reg(index), scale, disp, 8);
	encode(m, &q);
}

void gb_emit_mov_imm32(struct gb_emit *m, unsigned r, uint32_t imm)
{
	static const ZydisRegister r32[GB_REG_COUNT] = {
		ZYDIS_REGISTER_EAX, ZYDIS_REGISTER_EBX, ZYDIS_REGISTER_ECX, ZYDIS_REGISTER_EDX,
		ZYDIS_REGISTER_ESI, ZYDIS_REGISTER_EDI, ZYDIS_REGISTER_EBP, ZYDIS_REGISTER_ESP,
		ZYDIS_REGISTER_R8D, ZYDIS_REGISTER_R9D, ZYDIS_REGISTER_R10D, ZYDIS_REGISTER_R11D,
		ZYDIS_REGISTER_R12D, ZYDIS_REGISTER_R13D, ZYDIS_REGISTER_R14D, ZYDIS_REGISTER_R15D,
	};
	ZydisEncoderRequest q;
	req_init(&q, ZYDIS_MNEMONIC_MOV, 2);
	op_reg(&q.operands[0], r32[r]);
	op_imm(&q.operands[1], imm);
	encode(m, &q);
}

void gb_emit_syscall(struct gb_emit *m)
{
	ZydisEncoderRequest q;
	req_init(&q, ZYDIS_MNEMONIC_SYSCALL, 0);
	encode(m, &q);
}

size_t gb_emit_jump(struct gb_emit *m, ZydisMnemonic mn, uint64_t target)
{
	ZydisEncoderRequest q;
	req_init(&q, mn, 1);
	q.branch_type = ZYDIS_BRANCH_TYPE_NEAR;
	q.branch_width = ZYDIS_BRANCH_WIDTH_32;
	op_imm(&q.operands[0], (int64_t)target);
	size_t len = encode(m, &q);
	return len ? m->used - 4 : 0;
}

static void jump8(struct gb_emit *m, ZydisMnemonic mn, uint64_t target)
{
	ZydisEncoderRequest q;
	req_init(&q, mn, 1);
	q.branch_type = ZYDIS_BRANCH_TYPE_SHORT;
	q.branch_width = ZYDIS_BRANCH_WIDTH_8;
	op_imm(&q.operands[0], (int64_t)target);
	encode(m, &q);
}

void gb_emit_jrcxz(struct gb_emit *m, uint64_t target) { jump8(m, ZYDIS_MNEMONIC_JRCXZ, target); }
void gb_emit_jmp8(struct gb_emit *m, uint64_t target) { jump8(m, ZYDIS_MNEMONIC_JMP, target); }

void gb_emit_aim8(struct gb_emit *m, size_t off, uint64_t target)
{
	int64_t d = (int64_t)(target - (m->base + off + 2));
	if (m->err)
		return;
	if (d < -128 || d > 127) {
		m->err = -EINVAL;
		return;
	}
	m->buf[off + 1] = (uint8_t)(int8_t)d;
}

void gb_emit_moved(struct gb_emit *m, const struct gb_insn *in)
{
	if (m->err)
		return;
	if (!(in->zi.attributes & ZYDIS_ATTRIB_IS_RELATIVE)) {
		if (m->size - m->used < in->len) {
			m->err = -ENOSPC;
			return;
		}
		memcpy(m->buf + m->used, in->bytes, in->len);
		m->used += in->len;
		return;
	}
	/* RIP-relative memory operand: the encoder takes absolute addresses. */
	ZydisEncoderRequest q;
	if (!ZYAN_SUCCESS(ZydisEncoderDecodedInstructionToEncoderRequest(
		    &in->zi, in->ops, in->zi.operand_count_visible, &q))) {
		m->err = -EINVAL;
		return;
	}
	for (unsigned k = 0; k < q.operand_count; k++) {
		ZydisEncoderOperand *o = &q.operands[k];
		if (o->type == ZYDIS_OPERAND_TYPE_MEMORY && o->mem.base == ZYDIS_REGISTER_RIP)
			o->mem.displacement += (int64_t)(in->pc + in->len);
		else if (o->type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
			 in->ops[k].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && in->ops[k].imm.is_relative) {
			m->err = -EINVAL; /* branches are the translator's */
			return;
		}
	}
	encode(m, &q);
}

void gb_emit_repoint(struct gb_emit *m, size_t off, uint64_t target)
{
	int64_t rel = (int64_t)target - (int64_t)(m->base + off + 4);
	int32_t r32 = (int32_t)rel;
	memcpy(m->buf + off, &r32, 4);
}

void gb_emit_raw(struct gb_emit *m, const uint8_t *bytes, size_t n)
{
	if (m->err)
		return;
	if (m->size - m->used < n) {
		m->err = -ENOSPC;
		return;
	}
	memcpy(m->buf + m->used, bytes, n);
	m->used += n;
}

static void op_tls(ZydisEncoderRequest *q, ZydisEncoderOperand *o, int32_t off)
{
	op_mem(o, ZYDIS_REGISTER_NONE, ZYDIS_REGISTER_NONE, 0, off, 8);
	q->prefixes = ZYDIS_ATTRIB_HAS_SEGMENT_GS;
}

void gb_emit_tls_store(struct gb_emit *m, int32_t off, unsigned r)
{
	ZydisEncoderRequest q;
	req_init(&q, ZYDIS_MNEMONIC_MOV, 2);
	op_tls(&q, &q.operands[0], off);
	op_reg(&q.operands[1], gb_emit_reg(r));
	encode(m, &q);
}

void gb_emit_tls_load(struct gb_emit *m, unsigned r, int32_t off)
{
	ZydisEncoderRequest q;
	req_init(&q, ZYDIS_MNEMONIC_MOV, 2);
	op_reg(&q.operands[0], gb_emit_reg(r));
	op_tls(&q, &q.operands[1], off);
	encode(m, &q);
}

void gb_emit_tls_jmp(struct gb_emit *m, int32_t off)
{
	ZydisEncoderRequest q;
	req_init(&q, ZYDIS_MNEMONIC_JMP, 1);
	q.branch_type = ZYDIS_BRANCH_TYPE_NEAR;
	op_tls(&q, &q.operands[0], off);
	encode(m, &q);
}

void gb_emit_lea_rip(struct gb_emit *m, unsigned r, uint64_t addr)
{
	ZydisEncoderRequest q;
	req_init(&q, ZYDIS_MNEMONIC_LEA, 2);
	op_reg(&q.operands[0], gb_emit_reg(r));
	op_mem(&q.operands[1], ZYDIS_REGISTER_RIP, ZYDIS_REGISTER_NONE, 0, (int64_t)addr, 8);
	encode(m, &q);
}

void gb_emit_mov_imm64(struct gb_emit *m, unsigned r, uint64_t imm)
{
	ZydisEncoderRequest q;
	req_init(&q, ZYDIS_MNEMONIC_MOV, 2);
	op_reg(&q.operands[0], gb_emit_reg(r));
	op_imm(&q.operands[1], (int64_t)imm);
	encode(m, &q);
}

void gb_emit_xchg32(struct gb_emit *m, uint64_t addr, unsigned r)
{
	static const ZydisRegister r32[] = { ZYDIS_REGISTER_EAX, ZYDIS_REGISTER_EBX,
					     ZYDIS_REGISTER_ECX, ZYDIS_REGISTER_EDX };
	ZydisEncoderRequest q;
	req_init(&q, ZYDIS_MNEMONIC_XCHG, 2);
	op_mem(&q.operands[0], ZYDIS_REGISTER_RIP, ZYDIS_REGISTER_NONE, 0, (int64_t)addr, 4);
	op_reg(&q.operands[1], r < 4 ? r32[r] : ZYDIS_REGISTER_NONE);
	encode(m, &q);
}

/* o: the target operand of call/jmp in (a register or a memory operand,
 * RIP-relative ones re-encoded, rsp-based ones rsp_up bytes further: after
 * a push); false for an fs/gs-based one. */
static bool target_op(ZydisEncoderOperand *o, const struct gb_insn *in, int64_t rsp_up)
{
	const ZydisDecodedOperand *d = &in->ops[0];
	if (d->type == ZYDIS_OPERAND_TYPE_REGISTER) {
		op_reg(o, d->reg.value);
		return true;
	}
	if (d->type != ZYDIS_OPERAND_TYPE_MEMORY || d->mem.segment == ZYDIS_REGISTER_FS ||
	    d->mem.segment == ZYDIS_REGISTER_GS)
		return false;
	int64_t disp = d->mem.disp.value;
	if (d->mem.base == ZYDIS_REGISTER_RIP)
		disp += (int64_t)(in->pc + in->len);
	else if (d->mem.base == ZYDIS_REGISTER_RSP)
		disp += rsp_up;
	op_mem(o, d->mem.base, d->mem.index, d->mem.scale, disp, 8);
	return true;
}

void gb_emit_load_target(struct gb_emit *m, unsigned r, const struct gb_insn *in)
{
	ZydisEncoderRequest q;
	req_init(&q, ZYDIS_MNEMONIC_MOV, 2);
	op_reg(&q.operands[0], gb_emit_reg(r));
	if (!target_op(&q.operands[1], in, 0)) {
		m->err = m->err ? m->err : -EINVAL;
		return;
	}
	encode(m, &q);
}

void gb_emit_jmp_target(struct gb_emit *m, const struct gb_insn *in, int32_t rsp_up)
{
	ZydisEncoderRequest q;
	req_init(&q, ZYDIS_MNEMONIC_JMP, 1);
	q.branch_type = ZYDIS_BRANCH_TYPE_NEAR;
	if (!target_op(&q.operands[0], in, rsp_up)) {
		m->err = m->err ? m->err : -EINVAL;
		return;
	}
	encode(m, &q);
}

/* --- the forms of --values (vals.c) --- */

void gb_emit_load_mem(struct gb_emit *m, unsigned r, unsigned base, int32_t disp, unsigned size,
		      unsigned seg)
{
	ZydisEncoderRequest q;
	req_init(&q, size < 4 ? ZYDIS_MNEMONIC_MOVZX : ZYDIS_MNEMONIC_MOV, 2);
	ZydisRegister z = gb_emit_reg(r);
	op_reg(&q.operands[0], size == 8 ? z : ZydisRegisterEncode(ZYDIS_REGCLASS_GPR32,
								   ZydisRegisterGetId(z)));
	op_mem(&q.operands[1], gb_emit_reg(base), ZYDIS_REGISTER_NONE, 0, disp, (uint16_t)size);
	if (seg == GB_EMIT_SEG_FS)
		q.prefixes = ZYDIS_ATTRIB_HAS_SEGMENT_FS;
	else if (seg == GB_EMIT_SEG_GS)
		q.prefixes = ZYDIS_ATTRIB_HAS_SEGMENT_GS;
	encode(m, &q);
}

void gb_emit_store_vreg(struct gb_emit *m, unsigned base, int32_t disp, unsigned v, unsigned bytes)
{
	if (v < 16 && bytes <= 32) {
		gb_emit_store_vec(m, base, disp, v, bytes);
		return;
	}
	ZydisEncoderRequest q;
	ZydisRegister r = (ZydisRegister)((bytes == 64 ? ZYDIS_REGISTER_ZMM0 : bytes == 32 ?
					   ZYDIS_REGISTER_YMM0 : ZYDIS_REGISTER_XMM0) + v);
	req_init(&q, ZYDIS_MNEMONIC_VMOVDQU64, 2);
	op_mem(&q.operands[0], gb_emit_reg(base), ZYDIS_REGISTER_NONE, 0, disp, (uint16_t)bytes);
	op_reg(&q.operands[1], r);
	encode(m, &q);
}

void gb_emit_stmxcsr(struct gb_emit *m, unsigned base, int32_t disp)
{
	ZydisEncoderRequest q;
	req_init(&q, ZYDIS_MNEMONIC_STMXCSR, 1);
	op_mem(&q.operands[0], gb_emit_reg(base), ZYDIS_REGISTER_NONE, 0, disp, 4);
	encode(m, &q);
}
