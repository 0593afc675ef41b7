/* gb_decode() and gb_insn_format(): Zydis 4 in 64-bit mode, plus the
 * instruction flags the trace engine needs and the access plan (plan.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "decode/decode.h"
#include "decode/plan.h"

static uint32_t insn_flags(const struct gb_insn *in)
{
	const ZydisDecodedInstruction *zi = &in->zi;
	uint32_t f = 0;

	switch (zi->mnemonic) {
	case ZYDIS_MNEMONIC_SYSCALL:
	case ZYDIS_MNEMONIC_SYSENTER:
		f |= GB_INSN_SYSCALL;
		break;
	case ZYDIS_MNEMONIC_INT:
		if (in->ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && in->ops[0].imm.value.u == 0x80)
			f |= GB_INSN_SYSCALL;
		break;
	case ZYDIS_MNEMONIC_PUSHF:
	case ZYDIS_MNEMONIC_PUSHFD:
	case ZYDIS_MNEMONIC_PUSHFQ:
		f |= GB_INSN_PUSHF;
		break;
	case ZYDIS_MNEMONIC_CPUID:
		f |= GB_INSN_CPUID;
		break;
	default:
		break;
	}

	switch (zi->meta.category) {
	case ZYDIS_CATEGORY_COND_BR: case ZYDIS_CATEGORY_UNCOND_BR:
	case ZYDIS_CATEGORY_CALL: case ZYDIS_CATEGORY_RET:
	case ZYDIS_CATEGORY_SYSCALL: case ZYDIS_CATEGORY_SYSRET:
	case ZYDIS_CATEGORY_INTERRUPT:
		f |= GB_INSN_BRANCH;
		break;
	case ZYDIS_CATEGORY_STRINGOP:
		if (zi->attributes & (ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE |
				      ZYDIS_ATTRIB_HAS_REPNE))
			f |= GB_INSN_REP;
		break;
	default:
		break;
	}
	/* Anything else that writes RIP (xbegin, sysenter, ...). */
	for (int i = 0; i < zi->operand_count; i++) {
		const ZydisDecodedOperand *o = &in->ops[i];
		if (o->type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    (o->reg.value == ZYDIS_REGISTER_RIP || o->reg.value == ZYDIS_REGISTER_EIP) &&
		    (o->actions & (ZYDIS_OPERAND_ACTION_WRITE | ZYDIS_OPERAND_ACTION_CONDWRITE)))
			f |= GB_INSN_BRANCH;
	}
	if (in->plan.kind != GB_PLAN_NONE)
		f |= GB_INSN_MEM;
	return f;
}

int gb_decode(uint64_t pc, const uint8_t *bytes, size_t n, struct gb_insn *out)
{
	ZydisDecoder dec;
	uint32_t vec;
	int err;

	if (!bytes || !out || n == 0)
		return -EINVAL;
	if (n > GB_INSN_MAX_LEN)
		n = GB_INSN_MAX_LEN;
	memset(out, 0, sizeof(*out));
	if (!ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)))
		return -EINVAL;
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, bytes, n, &out->zi, out->ops)))
		return -EINVAL;
	out->pc = pc;
	out->len = out->zi.length;
	memcpy(out->bytes, bytes, out->len);
	if ((err = gb_plan_build(out)))
		return err;
	vec = out->flags & GB_INSN_NEEDS_VEC;   /* set by the plan */
	out->flags = insn_flags(out) | vec;
	return 0;
}

bool gb_insn_vex_family(const struct gb_insn *insn)
{
	switch (insn->zi.encoding) {
	case ZYDIS_INSTRUCTION_ENCODING_VEX:
	case ZYDIS_INSTRUCTION_ENCODING_EVEX:
	case ZYDIS_INSTRUCTION_ENCODING_XOP:
	case ZYDIS_INSTRUCTION_ENCODING_MVEX:
		return true;
	default:
		return false;
	}
}

void gb_insn_format(const struct gb_insn *insn, char *buf, size_t len)
{
	ZydisFormatter f;

	if (!len)
		return;
	if (!ZYAN_SUCCESS(ZydisFormatterInit(&f, ZYDIS_FORMATTER_STYLE_INTEL)) ||
	    !ZYAN_SUCCESS(ZydisFormatterFormatInstruction(&f, &insn->zi, insn->ops,
							  insn->zi.operand_count_visible,
							  buf, len, insn->pc, NULL)))
		snprintf(buf, len, "(bad)");
}
