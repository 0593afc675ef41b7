/* The registers an instruction writes: see written.h. */
#include "decode/written.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode/plan.h"

/* Zydis's register ids (the encoding's: rax rcx rdx rbx rsp rbp rsi rdi)
 * as enum gb_reg. */
static const uint8_t gpr_of_id[16] = {
	GB_REG_RAX, GB_REG_RCX, GB_REG_RDX, GB_REG_RBX, GB_REG_RSP, GB_REG_RBP, GB_REG_RSI,
	GB_REG_RDI, GB_REG_R8,  GB_REG_R9,  GB_REG_R10, GB_REG_R11, GB_REG_R12, GB_REG_R13,
	GB_REG_R14, GB_REG_R15,
};

static const char *const gpr_names[GB_REG_COUNT] = {
	"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp",
	"r8",  "r9",  "r10", "r11", "r12", "r13", "r14", "r15",
};

struct set {
	struct gb_wreg *out;
	int n, max;
};

static void add(struct set *s, unsigned kind, unsigned num)
{
	for (int k = 0; k < s->n; k++)
		if (s->out[k].kind == kind && s->out[k].num == num)
			return;
	if (s->n < s->max)
		s->out[s->n++] = (struct gb_wreg){ (uint8_t)kind, (uint8_t)num };
}

static void add_reg(struct set *s, ZydisRegister r)
{
	switch (ZydisRegisterGetClass(r)) {
	case ZYDIS_REGCLASS_GPR8:
	case ZYDIS_REGCLASS_GPR16:
	case ZYDIS_REGCLASS_GPR32:
	case ZYDIS_REGCLASS_GPR64: {
		ZydisRegister big = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
		ZyanI8 id = ZydisRegisterGetId(big);
		if (id >= 0 && id < 16)
			add(s, GB_WR_GPR, gpr_of_id[id]);
		break;
	}
	case ZYDIS_REGCLASS_X87:
		add(s, GB_WR_ST, (unsigned)ZydisRegisterGetId(r) & 7);
		break;
	case ZYDIS_REGCLASS_XMM:
		add(s, GB_WR_XMM, (unsigned)ZydisRegisterGetId(r) & 31);
		break;
	case ZYDIS_REGCLASS_YMM:
		add(s, GB_WR_YMM, (unsigned)ZydisRegisterGetId(r) & 31);
		break;
	case ZYDIS_REGCLASS_ZMM:
		add(s, GB_WR_ZMM, (unsigned)ZydisRegisterGetId(r) & 31);
		break;
	case ZYDIS_REGCLASS_MASK:
		add(s, GB_WR_K, (unsigned)ZydisRegisterGetId(r) & 7);
		break;
	case ZYDIS_REGCLASS_FLAGS:
		add(s, GB_WR_EFLAGS, 0);
		break;
	default:
		if (r == ZYDIS_REGISTER_X87STATUS)
			add(s, GB_WR_FSTAT, 0);
		else if (r == ZYDIS_REGISTER_X87CONTROL)
			add(s, GB_WR_FCTRL, 0);
		else if (r == ZYDIS_REGISTER_MXCSR)
			add(s, GB_WR_MXCSR, 0);
		/* rip (the next line's pc), segment selectors, x87 tags, mmx,
		 * tmm, bnd: not listed (docs/trace-format.md "Values"). */
		break;
	}
}

static int by_order(const void *a, const void *b)
{
	unsigned x = gb_wreg_order(a), y = gb_wreg_order(b);
	return x < y ? -1 : x > y;
}

/* An x87 instruction that writes a stack register or pops (fstp, faddp,
 * fcompp, fucomip...: their mnemonics end in p; fnop lists the stack too,
 * unchanged). */
static bool x87_moves_stack(const struct set *s, const ZydisDecodedInstruction *zi)
{
	for (int k = 0; k < s->n; k++)
		if (s->out[k].kind == GB_WR_ST)
			return true;
	const char *m = ZydisMnemonicGetString(zi->mnemonic);
	size_t n = m ? strlen(m) : 0;
	return n && m[n - 1] == 'p';
}

static bool flags_changed(const ZydisAccessedFlags *f)
{
	return f && (f->modified | f->set_0 | f->set_1 | f->undefined);
}

int gb_insn_written(const struct gb_insn *in, struct gb_wreg *out, int max)
{
	struct set s = { out, 0, max };
	const ZydisDecodedInstruction *zi = &in->zi;
	switch (zi->mnemonic) {
	case ZYDIS_MNEMONIC_SYSCALL:
		/* rcx and r11 by the instruction, rax by the kernel; rflags comes
		 * back from r11 as it was. */
		add(&s, GB_WR_GPR, GB_REG_RAX);
		add(&s, GB_WR_GPR, GB_REG_RCX);
		add(&s, GB_WR_GPR, GB_REG_R11);
		goto sorted;
	case ZYDIS_MNEMONIC_WRFSBASE:
		add(&s, GB_WR_FS_BASE, 0);
		break;
	case ZYDIS_MNEMONIC_WRGSBASE:
		add(&s, GB_WR_GS_BASE, 0);
		break;
	case ZYDIS_MNEMONIC_FLDCW: /* (Zydis lists no x87 control operand) */
		add(&s, GB_WR_FCTRL, 0);
		break;
	default:
		break;
	}
	for (int k = 0; k < zi->operand_count; k++) {
		const ZydisDecodedOperand *o = &in->ops[k];
		if (o->type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    (o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
			add_reg(&s, o->reg.value);
	}
	if (flags_changed(zi->cpu_flags))
		add(&s, GB_WR_EFLAGS, 0);
	if (flags_changed(zi->fpu_flags))
		add(&s, GB_WR_FSTAT, 0);
	switch (zi->meta.exception_class) {
	case ZYDIS_EXCEPTION_CLASS_SSE2: case ZYDIS_EXCEPTION_CLASS_SSE3:
	case ZYDIS_EXCEPTION_CLASS_AVX2: case ZYDIS_EXCEPTION_CLASS_AVX3:
	case ZYDIS_EXCEPTION_CLASS_E2: case ZYDIS_EXCEPTION_CLASS_E3:
	case ZYDIS_EXCEPTION_CLASS_E10:
		/* SIMD floating point: its exceptions set mxcsr's sticky flags. */
		add(&s, GB_WR_MXCSR, 0);
		break;
	default:
		break;
	}
	if (zi->meta.isa_ext == ZYDIS_ISA_EXT_X87 && x87_moves_stack(&s, zi)) {
		/* The stack's names shift on a push or a pop: all of it. */
		for (unsigned k = 0; k < 8; k++)
			add(&s, GB_WR_ST, k);
		add(&s, GB_WR_FSTAT, 0);
	}
sorted:
	qsort(out, (size_t)s.n, sizeof(*out), by_order);
	return s.n;
}

bool gb_insn_writes_all(const struct gb_insn *in)
{
	switch (in->zi.mnemonic) {
	case ZYDIS_MNEMONIC_FXRSTOR: case ZYDIS_MNEMONIC_FXRSTOR64:
	case ZYDIS_MNEMONIC_XRSTOR: case ZYDIS_MNEMONIC_XRSTOR64:
	case ZYDIS_MNEMONIC_XRSTORS: case ZYDIS_MNEMONIC_XRSTORS64:
	case ZYDIS_MNEMONIC_FRSTOR: case ZYDIS_MNEMONIC_FNINIT: case ZYDIS_MNEMONIC_FLDENV:
	case ZYDIS_MNEMONIC_VZEROALL: case ZYDIS_MNEMONIC_VZEROUPPER:
		return true;
	default:
		return false;
	}
}

static const char *const kind_names[GB_WR_KINDS] = {
	[GB_WR_RIP] = "rip", [GB_WR_EFLAGS] = "eflags", [GB_WR_FS_BASE] = "fs_base",
	[GB_WR_GS_BASE] = "gs_base", [GB_WR_ST] = "st", [GB_WR_FCTRL] = "fctrl",
	[GB_WR_FSTAT] = "fstat", [GB_WR_MXCSR] = "mxcsr", [GB_WR_XMM] = "xmm",
	[GB_WR_YMM] = "ymm", [GB_WR_ZMM] = "zmm", [GB_WR_K] = "k",
};

static bool numbered(unsigned kind)
{
	return kind == GB_WR_ST || kind == GB_WR_XMM || kind == GB_WR_YMM || kind == GB_WR_ZMM ||
	       kind == GB_WR_K;
}

static unsigned count_of(unsigned kind)
{
	switch (kind) {
	case GB_WR_GPR: return GB_REG_COUNT;
	case GB_WR_ST: case GB_WR_K: return 8;
	case GB_WR_XMM: case GB_WR_YMM: case GB_WR_ZMM: return 32;
	default: return 1;
	}
}

int gb_wreg_name(const struct gb_wreg *r, char *buf, size_t len)
{
	if (r->kind == GB_WR_GPR)
		return snprintf(buf, len, "%s", r->num < GB_REG_COUNT ? gpr_names[r->num] : "?");
	if (r->kind >= GB_WR_KINDS)
		return snprintf(buf, len, "?");
	if (numbered(r->kind))
		return snprintf(buf, len, "%s%u", kind_names[r->kind], r->num);
	return snprintf(buf, len, "%s", kind_names[r->kind]);
}

unsigned gb_wreg_size(const struct gb_wreg *r)
{
	switch (r->kind) {
	case GB_WR_ST: return 10;
	case GB_WR_FCTRL: case GB_WR_FSTAT: return 2;
	case GB_WR_MXCSR: return 4;
	case GB_WR_XMM: return 16;
	case GB_WR_YMM: return 32;
	case GB_WR_ZMM: return 64;
	default: return 8;
	}
}

unsigned gb_wreg_order(const struct gb_wreg *r)
{
	return (unsigned)r->kind * 64 + r->num;
}

int gb_wreg_parse(const char *name, struct gb_wreg *r)
{
	for (unsigned k = 0; k < GB_REG_COUNT; k++)
		if (!strcmp(name, gpr_names[k])) {
			*r = (struct gb_wreg){ GB_WR_GPR, (uint8_t)k };
			return 0;
		}
	for (unsigned kind = GB_WR_RIP; kind < GB_WR_KINDS; kind++) {
		size_t n = strlen(kind_names[kind]);
		if (strncmp(name, kind_names[kind], n))
			continue;
		if (!numbered(kind)) {
			if (name[n])
				continue;
			*r = (struct gb_wreg){ (uint8_t)kind, 0 };
			return 0;
		}
		char *end;
		unsigned long v = strtoul(name + n, &end, 10);
		if (name[n] < '0' || name[n] > '9' || *end || v >= count_of(kind))
			continue;
		*r = (struct gb_wreg){ (uint8_t)kind, (uint8_t)v };
		return 0;
	}
	return -1;
}
