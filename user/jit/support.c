/* What the translator takes (see jit.h: gb_jit__supported,
 * gb_jit__nostop_supported, gb_jit__emulated). */
#include "jit/jit.h"

#include "decode/plan.h"
#include "jit/internal.h"

static bool rel_branch(const struct gb_insn *in)
{
	return in->zi.mnemonic == ZYDIS_MNEMONIC_JMP || (in->zi.meta.category == ZYDIS_CATEGORY_COND_BR &&
	       in->zi.mnemonic != ZYDIS_MNEMONIC_JRCXZ && in->zi.mnemonic != ZYDIS_MNEMONIC_JECXZ &&
	       in->zi.mnemonic != ZYDIS_MNEMONIC_LOOP && in->zi.mnemonic != ZYDIS_MNEMONIC_LOOPE &&
	       in->zi.mnemonic != ZYDIS_MNEMONIC_LOOPNE);
}

static bool relative_imm(const struct gb_insn *in)
{
	for (unsigned k = 0; k < in->zi.operand_count; k++)
		if (in->ops[k].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && in->ops[k].imm.is_relative)
			return true;
	return false;
}

bool gb_jit__emulated(const struct gb_insn *in)
{
	const ZydisDecodedInstruction *z = &in->zi;
	if (z->meta.branch_type == ZYDIS_BRANCH_TYPE_FAR || z->operand_width != 64 ||
	    (in->flags & GB_INSN_NEEDS_VEC))
		return false;
	switch (z->mnemonic) {
	case ZYDIS_MNEMONIC_RET:
	case ZYDIS_MNEMONIC_CALL:
		return true;
	case ZYDIS_MNEMONIC_JMP: /* indirect only; jmp rel is rebuilt */
		return !relative_imm(in);
	default:
		return false;
	}
}

/* The REP string instructions rep.c runs one iteration at a time: movs,
 * stos, lods, cmps, scas (not ins/outs), 64-bit addressing (a 0x67 REP
 * counts ecx: stepped elsewhere, refused here). */
static bool rep_ok(const struct gb_insn *gi)
{
	return gi->zi.meta.category == ZYDIS_CATEGORY_STRINGOP && gi->zi.address_width == 64 &&
	       gi->plan.reg_bits == 64;
}

/* What only the stop-free mode takes (no stop to lean on: each is run
 * exactly in the cache, docs/trace.md "A trap without stops"): REP string
 * instructions (rep.c), bit tests with a register bit offset into memory
 * (the offset recorded, the unit found by the consumer), enter (its
 * accesses as templates of rsp and rbp), AVX2 gathers and the sign-masked
 * moves (vmaskmov, vpmaskmov, maskmovdqu: the index and mask vectors
 * recorded, insn.c), AVX-512 opmask-masked loads, stores, compress and
 * expand (the opmask recorded), popf (after a check that it does not set TF:
 * popf.c), and instructions that only raise a signal (the fault is mapped
 * back by the trap). */
static bool nostop_only(const struct gb_insn *in)
{
	if (in->flags & GB_INSN_REP)
		return rep_ok(in);
	if (in->plan.kind == GB_PLAN_BT)
		return true;
	if ((in->plan.kind == GB_PLAN_VSIB || (in->plan.kind == GB_PLAN_MASKED &&
	     in->plan.map == GB_MAP_SIGN)) && !in->plan.kreg)
		return !(in->plan.refs[0].flags & GB_REF_WRITE) || in->plan.kind == GB_PLAN_MASKED;
	/* AVX-512 {k} loads, stores and compress/expand: the opmask recorded
	 * (insn.c; gathers and scatters with an opmask are stepped) */
	if ((in->plan.kind == GB_PLAN_MASKED || in->plan.kind == GB_PLAN_COMPRESS) &&
	    in->plan.kreg && in->plan.map != GB_MAP_SIGN && in->plan.nrefs == 1)
		return true;
	if (in->plan.kind == GB_PLAN_ENTER) /* as its templates (insn.c) */
		return in->plan.level <= ENTER_LEVELS;
	switch (in->zi.mnemonic) {
	case ZYDIS_MNEMONIC_POPF: case ZYDIS_MNEMONIC_POPFQ:
	case ZYDIS_MNEMONIC_UD0: case ZYDIS_MNEMONIC_UD1: case ZYDIS_MNEMONIC_UD2:
	case ZYDIS_MNEMONIC_INT3: case ZYDIS_MNEMONIC_INT1: case ZYDIS_MNEMONIC_HLT:
	case ZYDIS_MNEMONIC_INT: /* (int 0x80 is a system call: GB_INSN_SYSCALL) */
		return !(in->flags & GB_INSN_SYSCALL);
	default:
		return false;
	}
}

bool gb_jit__nostop_supported(const struct gb_insn *in)
{
	if (in->zi.mnemonic == ZYDIS_MNEMONIC_SYSCALL)
		return true; /* made without the lock */
	for (unsigned k = 0; k < in->zi.operand_count; k++)
		if (in->ops[k].type == ZYDIS_OPERAND_TYPE_MEMORY && in->ops[k].mem.segment == ZYDIS_REGISTER_GS)
			return false; /* gs is the cache's (the thread's area) */
	if (gb_jit__emulated(in) && in->zi.mnemonic != ZYDIS_MNEMONIC_RET &&
	    in->ops[0].type == ZYDIS_OPERAND_TYPE_MEMORY && in->ops[0].mem.segment == ZYDIS_REGISTER_FS)
		return false; /* its target is loaded with gs the cache's */
	for (unsigned k = 0; k < in->zi.operand_count; k++)
		if (in->ops[k].type == ZYDIS_OPERAND_TYPE_MEMORY && in->ops[k].mem.base == ZYDIS_REGISTER_EIP)
			return false;
	return nostop_only(in) || gb_jit__supported(in);
}

bool gb_jit__supported(const struct gb_insn *in)
{
	const struct gb_plan *p = &in->plan;
	if (in->flags & (GB_INSN_SYSCALL | GB_INSN_NEEDS_VEC | GB_INSN_REP))
		return false;
	if (p->kind != GB_PLAN_NONE && p->kind != GB_PLAN_REFS &&
	    !(p->kind == GB_PLAN_STRING && !p->reg_bits))
		return false;
	for (unsigned k = 0; k < p->nrefs; k++)
		if (p->refs[k].flags & GB_REF_INDEX_AL)
			return false;
	for (unsigned k = 0; k < in->zi.operand_count; k++)
		if (in->ops[k].type == ZYDIS_OPERAND_TYPE_MEMORY && in->ops[k].mem.base == ZYDIS_REGISTER_EIP)
			return false; /* EIP-relative (0x67): wraps at 4 GiB, stepped */
	switch (in->zi.meta.category) {
	case ZYDIS_CATEGORY_CALL: case ZYDIS_CATEGORY_RET:
		return gb_jit__emulated(in);
	case ZYDIS_CATEGORY_UNCOND_BR:
		if (gb_jit__emulated(in))
			return true;
		/* fall through */
	case ZYDIS_CATEGORY_COND_BR:
		/* direct jmp / jcc rel are rebuilt; the rest is stepped */
		if (!(rel_branch(in) && relative_imm(in)))
			return false;
		break;
	case ZYDIS_CATEGORY_INTERRUPT: case ZYDIS_CATEGORY_SYSTEM: case ZYDIS_CATEGORY_SYSCALL:
	case ZYDIS_CATEGORY_SYSRET:
		return false;
	default:
		if (relative_imm(in)) /* xbegin and the like */
			return false;
		break;
	}
	switch (in->zi.mnemonic) {
	case ZYDIS_MNEMONIC_UD0: case ZYDIS_MNEMONIC_UD1: case ZYDIS_MNEMONIC_UD2:
	case ZYDIS_MNEMONIC_INT3: case ZYDIS_MNEMONIC_INT: case ZYDIS_MNEMONIC_INT1:
	case ZYDIS_MNEMONIC_INTO: case ZYDIS_MNEMONIC_HLT: case ZYDIS_MNEMONIC_WRFSBASE:
	case ZYDIS_MNEMONIC_WRGSBASE: case ZYDIS_MNEMONIC_POPFQ: case ZYDIS_MNEMONIC_POPF:
	case ZYDIS_MNEMONIC_XBEGIN: case ZYDIS_MNEMONIC_XEND: case ZYDIS_MNEMONIC_XABORT:
		return false; /* signals, segment bases, TF: the step engine's */
	default:
		return true;
	}
}

