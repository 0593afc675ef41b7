/* Building an instruction's access plan from Zydis' view of it.
 *
 * Zydis reports memory operands (visible and hidden) with their sizes and
 * read/write actions; this file turns them into struct gb_memref templates
 * in the order the instruction performs them, and applies the fix-ups
 * listed in docs/decoder.md: stack operands at the decremented RSP, the
 * RSP-after-increment rule of pop [rsp+..], xlat's AL, RIP-relative and
 * fs/gs addressing, bit-test units, REP counts, and the plans whose
 * accesses depend on vector/mask registers or CPUID (VSIB, masked
 * operations, compress/expand, xsave).
 */
#include <errno.h>
#include <string.h>

#include "decode/plan.h"

uint8_t gb_reg_slot(ZydisRegister r)
{
	switch (ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r)) {
	case ZYDIS_REGISTER_RAX: return GB_REG_RAX;
	case ZYDIS_REGISTER_RBX: return GB_REG_RBX;
	case ZYDIS_REGISTER_RCX: return GB_REG_RCX;
	case ZYDIS_REGISTER_RDX: return GB_REG_RDX;
	case ZYDIS_REGISTER_RSI: return GB_REG_RSI;
	case ZYDIS_REGISTER_RDI: return GB_REG_RDI;
	case ZYDIS_REGISTER_RBP: return GB_REG_RBP;
	case ZYDIS_REGISTER_RSP: return GB_REG_RSP;
	case ZYDIS_REGISTER_R8:  return GB_REG_R8;
	case ZYDIS_REGISTER_R9:  return GB_REG_R9;
	case ZYDIS_REGISTER_R10: return GB_REG_R10;
	case ZYDIS_REGISTER_R11: return GB_REG_R11;
	case ZYDIS_REGISTER_R12: return GB_REG_R12;
	case ZYDIS_REGISTER_R13: return GB_REG_R13;
	case ZYDIS_REGISTER_R14: return GB_REG_R14;
	case ZYDIS_REGISTER_R15: return GB_REG_R15;
	default: return GB_REG_NONE;
	}
}

static bool is_mem(const ZydisDecodedOperand *op)
{
	return op->type == ZYDIS_OPERAND_TYPE_MEMORY &&
	       (op->mem.type == ZYDIS_MEMOP_TYPE_MEM || op->mem.type == ZYDIS_MEMOP_TYPE_VSIB);
}

static bool is_vec(ZydisRegister r)
{
	ZydisRegisterClass c = ZydisRegisterGetClass(r);
	return c == ZYDIS_REGCLASS_XMM || c == ZYDIS_REGCLASS_YMM || c == ZYDIS_REGCLASS_ZMM;
}

/* The template of a Zydis memory operand (VSIB: base + disp only). */
static int ref_of(const struct gb_insn *in, const ZydisDecodedOperand *op, bool write,
		  struct gb_memref *r)
{
	const ZydisDecodedOperandMem *m = &op->mem;

	memset(r, 0, sizeof(*r));
	r->disp = m->disp.has_displacement ? m->disp.value : 0;
	r->size = (op->size + 7) / 8;
	r->base = GB_REG_NONE;
	r->index = GB_REG_NONE;
	r->scale = m->scale ? m->scale : 1;
	r->flags = write ? GB_REF_WRITE : 0;
	if (in->zi.address_width == 32)
		r->flags |= GB_REF_ADDR32;
	if (m->segment == ZYDIS_REGISTER_FS)
		r->flags |= GB_REF_FS;
	else if (m->segment == ZYDIS_REGISTER_GS)
		r->flags |= GB_REF_GS;

	if (m->base == ZYDIS_REGISTER_RIP || m->base == ZYDIS_REGISTER_EIP) {
		r->disp += (int64_t)(in->pc + in->len);
	} else if (m->base != ZYDIS_REGISTER_NONE) {
		r->base = gb_reg_slot(m->base);
		if (r->base == GB_REG_NONE)
			return -EINVAL;
	}
	if (m->type != ZYDIS_MEMOP_TYPE_VSIB && m->index != ZYDIS_REGISTER_NONE) {
		r->index = gb_reg_slot(m->index);
		if (r->index == GB_REG_NONE)
			return -EINVAL;
	}
	return 0;
}

/* A stack slot: [rsp + disp], size bytes. */
static void stack_ref(struct gb_plan *p, int64_t disp, uint32_t size, bool write)
{
	struct gb_memref *r = &p->refs[p->nrefs++];

	memset(r, 0, sizeof(*r));
	r->disp = disp;
	r->size = size;
	r->base = GB_REG_RSP;
	r->index = GB_REG_NONE;
	r->scale = 1;
	r->flags = write ? GB_REF_WRITE : 0;
}

/* The first visible memory operand, or NULL. */
static const ZydisDecodedOperand *mem_op(const struct gb_insn *in)
{
	for (int i = 0; i < in->zi.operand_count_visible; i++)
		if (is_mem(&in->ops[i]))
			return &in->ops[i];
	return NULL;
}

static bool op_writes(const ZydisDecodedOperand *op)
{
	return op->actions & (ZYDIS_OPERAND_ACTION_WRITE | ZYDIS_OPERAND_ACTION_CONDWRITE);
}

/* push/pop/call/ret/enter/leave/pushf/popf/iret: Zydis gives the stack
 * operand at the pre-decrement RSP; build the hardware slots instead. */
static int plan_stack(struct gb_insn *in)
{
	const ZydisDecodedInstruction *zi = &in->zi;
	const ZydisDecodedOperand *m = mem_op(in);
	struct gb_plan *p = &in->plan;
	uint32_t w = zi->operand_width / 8;
	int err;

	p->kind = GB_PLAN_REFS;
	switch (zi->mnemonic) {
	case ZYDIS_MNEMONIC_PUSH:
		if (m) {       /* push [mem]: the address uses the RSP before the push */
			if ((err = ref_of(in, m, false, &p->refs[p->nrefs++])))
				return err;
		}
		stack_ref(p, -(int64_t)w, w, true);
		return 0;
	case ZYDIS_MNEMONIC_PUSHF:
	case ZYDIS_MNEMONIC_PUSHFD:
	case ZYDIS_MNEMONIC_PUSHFQ:
		stack_ref(p, -(int64_t)w, w, true);
		return 0;
	case ZYDIS_MNEMONIC_POP:
		stack_ref(p, 0, w, false);
		if (m) {       /* pop [mem]: the address uses the RSP after the pop */
			struct gb_memref *r = &p->refs[p->nrefs++];
			if ((err = ref_of(in, m, true, r)))
				return err;
			if (r->base == GB_REG_RSP)
				r->disp += w;
		}
		return 0;
	case ZYDIS_MNEMONIC_POPF:
	case ZYDIS_MNEMONIC_POPFD:
	case ZYDIS_MNEMONIC_POPFQ:
		stack_ref(p, 0, w, false);
		return 0;
	case ZYDIS_MNEMONIC_CALL:
		if (m && (err = ref_of(in, m, false, &p->refs[p->nrefs++])))
			return err;
		if (zi->meta.branch_type == ZYDIS_BRANCH_TYPE_FAR) {
			stack_ref(p, -(int64_t)w, w, true);       /* CS */
			stack_ref(p, -2 * (int64_t)w, w, true);   /* return RIP */
		} else {
			stack_ref(p, -8, 8, true);
		}
		return 0;
	case ZYDIS_MNEMONIC_RET:
		if (zi->meta.branch_type == ZYDIS_BRANCH_TYPE_FAR) {
			stack_ref(p, 0, w, false);
			stack_ref(p, w, w, false);
		} else {
			stack_ref(p, 0, 8, false);
		}
		return 0;
	case ZYDIS_MNEMONIC_IRET:
	case ZYDIS_MNEMONIC_IRETD:
	case ZYDIS_MNEMONIC_IRETQ:
		for (int i = 0; i < 5; i++)   /* RIP, CS, RFLAGS, RSP, SS */
			stack_ref(p, (int64_t)i * w, w, false);
		return 0;
	case ZYDIS_MNEMONIC_LEAVE:    /* RSP = RBP, then pop RBP */
		stack_ref(p, 0, w, false);
		p->refs[0].base = GB_REG_RBP;
		return 0;
	case ZYDIS_MNEMONIC_ENTER:
		p->kind = GB_PLAN_ENTER;
		p->elem = w;
		p->level = in->ops[1].imm.value.u & 31;
		return 0;
	default:
		return -EINVAL;
	}
}

/* bt/bts/btr/btc [mem], reg: the bit offset selects an operand-sized unit. */
static int plan_bt(struct gb_insn *in)
{
	struct gb_plan *p = &in->plan;
	const ZydisDecodedOperand *m = &in->ops[0], *r = &in->ops[1];
	int err;

	if ((err = ref_of(in, m, false, &p->refs[0])))
		return err;
	p->nrefs = 1;
	if (m->actions & ZYDIS_OPERAND_ACTION_WRITE) {
		p->refs[1] = p->refs[0];
		p->refs[1].flags |= GB_REF_WRITE;
		p->nrefs = 2;
	}
	p->kind = GB_PLAN_REFS;
	if (r->type == ZYDIS_OPERAND_TYPE_REGISTER) {
		p->kind = GB_PLAN_BT;
		p->reg = gb_reg_slot(r->reg.value);
		p->reg_bits = m->size;
		if (p->reg == GB_REG_NONE)
			return -EINVAL;
	}
	return 0;
}

static int plan_xsave(struct gb_insn *in)
{
	struct gb_plan *p = &in->plan;
	ZydisMnemonic mn = in->zi.mnemonic;
	bool restore = mn == ZYDIS_MNEMONIC_XRSTOR || mn == ZYDIS_MNEMONIC_XRSTOR64 ||
		       mn == ZYDIS_MNEMONIC_XRSTORS || mn == ZYDIS_MNEMONIC_XRSTORS64;
	int err;

	if ((err = ref_of(in, &in->ops[0], !restore, &p->refs[0])))
		return err;
	if (mn == ZYDIS_MNEMONIC_XSAVEC || mn == ZYDIS_MNEMONIC_XSAVEC64 ||
	    mn == ZYDIS_MNEMONIC_XSAVES || mn == ZYDIS_MNEMONIC_XSAVES64 ||
	    mn == ZYDIS_MNEMONIC_XRSTORS || mn == ZYDIS_MNEMONIC_XRSTORS64)
		p->refs[0].flags |= GB_REF_XSAVE_C;
	p->nrefs = 1;
	p->kind = GB_PLAN_XSAVE;
	return 0;
}

/* Index/data element sizes of a gather/scatter, from its mnemonic. */
static bool vsib_sizes(ZydisMnemonic mn, uint8_t *idx, uint8_t *data)
{
	switch (mn) {
	case ZYDIS_MNEMONIC_VPGATHERDD: case ZYDIS_MNEMONIC_VPSCATTERDD:
	case ZYDIS_MNEMONIC_VGATHERDPS: case ZYDIS_MNEMONIC_VSCATTERDPS:
		*idx = 4; *data = 4; return true;
	case ZYDIS_MNEMONIC_VPGATHERDQ: case ZYDIS_MNEMONIC_VPSCATTERDQ:
	case ZYDIS_MNEMONIC_VGATHERDPD: case ZYDIS_MNEMONIC_VSCATTERDPD:
		*idx = 4; *data = 8; return true;
	case ZYDIS_MNEMONIC_VPGATHERQD: case ZYDIS_MNEMONIC_VPSCATTERQD:
	case ZYDIS_MNEMONIC_VGATHERQPS: case ZYDIS_MNEMONIC_VSCATTERQPS:
		*idx = 8; *data = 4; return true;
	case ZYDIS_MNEMONIC_VPGATHERQQ: case ZYDIS_MNEMONIC_VPSCATTERQQ:
	case ZYDIS_MNEMONIC_VGATHERQPD: case ZYDIS_MNEMONIC_VSCATTERQPD:
		*idx = 8; *data = 8; return true;
	default:
		return false;
	}
}

/* Gathers and scatters: elements from the index vector, by mask. */
static int plan_vsib(struct gb_insn *in, const ZydisDecodedOperand *m)
{
	struct gb_plan *p = &in->plan;
	uint8_t idx, data;
	int err;

	if (!vsib_sizes(in->zi.mnemonic, &idx, &data))
		return 0;   /* VSIB prefetches (vgatherpf*): not accesses */
	if ((err = ref_of(in, m, op_writes(m), &p->refs[0])))
		return err;
	p->refs[0].size = data;
	p->nrefs = 1;
	p->kind = GB_PLAN_VSIB;
	p->vreg = ZydisRegisterGetId(m->mem.index);
	p->idx_elem = idx;
	p->elem = data;
	p->nelem = in->zi.avx.vector_length / 8 / (idx > data ? idx : data);
	if (in->zi.avx.mask.reg != ZYDIS_REGISTER_NONE &&
	    ZydisRegisterGetClass(in->zi.avx.mask.reg) == ZYDIS_REGCLASS_MASK) {
		p->kreg = ZydisRegisterGetId(in->zi.avx.mask.reg);
	} else {
		/* AVX2: the mask vector is the last visible operand. */
		const ZydisDecodedOperand *mk = &in->ops[in->zi.operand_count_visible - 1];
		if (mk->type != ZYDIS_OPERAND_TYPE_REGISTER || !is_vec(mk->reg.value))
			return -EINVAL;
		p->map = GB_MAP_SIGN;
		p->mreg = ZydisRegisterGetId(mk->reg.value);
	}
	in->flags |= GB_INSN_NEEDS_VEC;
	return 0;
}

/* vmaskmov/vpmaskmov (both directions) and maskmovdqu: per-element sign bits
 * of a vector register select the elements. */
static int plan_sign_masked(struct gb_insn *in, uint8_t elem)
{
	struct gb_plan *p = &in->plan;
	const ZydisDecodedOperand *m = mem_op(in), *mk;
	int err;

	if (!m)      /* maskmovdqu: the [rdi] destination is hidden */
		for (int i = 0; i < in->zi.operand_count; i++)
			if (is_mem(&in->ops[i]))
				m = &in->ops[i];
	if (!m)
		return -EINVAL;
	/* The mask is operand 1 in every form (vmaskmovps [m], mask, src;
	 * vmaskmovps dst, mask, [m]; maskmovdqu src, mask). */
	mk = &in->ops[1];
	if (mk->type != ZYDIS_OPERAND_TYPE_REGISTER || !is_vec(mk->reg.value))
		return -EINVAL;
	if ((err = ref_of(in, m, op_writes(m), &p->refs[0])))
		return err;
	p->nrefs = 1;
	p->kind = GB_PLAN_MASKED;
	p->map = GB_MAP_SIGN;
	p->mreg = ZydisRegisterGetId(mk->reg.value);
	p->elem = elem;
	p->nelem = p->refs[0].size / elem;
	p->lanes = p->nelem;
	in->flags |= GB_INSN_NEEDS_VEC;
	return 0;
}

/* EVEX {k} instructions whose memory operand is read whole whatever the
 * mask: element j of memory is not (only) an input of lane j, and the
 * processor does not suppress faults on it.  Checked on an AVX-512 machine
 * by putting the bytes the mask leaves out on a PROT_NONE page: each of
 * these faults (docs/decoder.md). */
static bool evex_whole(const struct gb_insn *in, const ZydisDecodedOperand *m)
{
	switch (in->zi.mnemonic) {
	case ZYDIS_MNEMONIC_VPERMB: case ZYDIS_MNEMONIC_VPERMW:
	case ZYDIS_MNEMONIC_VPERMD: case ZYDIS_MNEMONIC_VPERMQ:
	case ZYDIS_MNEMONIC_VPERMPS: case ZYDIS_MNEMONIC_VPERMPD:
	case ZYDIS_MNEMONIC_VPERMI2B: case ZYDIS_MNEMONIC_VPERMI2W:
	case ZYDIS_MNEMONIC_VPERMI2D: case ZYDIS_MNEMONIC_VPERMI2Q:
	case ZYDIS_MNEMONIC_VPERMI2PS: case ZYDIS_MNEMONIC_VPERMI2PD:
	case ZYDIS_MNEMONIC_VPERMT2B: case ZYDIS_MNEMONIC_VPERMT2W:
	case ZYDIS_MNEMONIC_VPERMT2D: case ZYDIS_MNEMONIC_VPERMT2Q:
	case ZYDIS_MNEMONIC_VPERMT2PS: case ZYDIS_MNEMONIC_VPERMT2PD:
	case ZYDIS_MNEMONIC_VPERMILPS: case ZYDIS_MNEMONIC_VPERMILPD:
	case ZYDIS_MNEMONIC_VALIGND: case ZYDIS_MNEMONIC_VALIGNQ:
	case ZYDIS_MNEMONIC_VPALIGNR:
	case ZYDIS_MNEMONIC_VPSHUFB: case ZYDIS_MNEMONIC_VPSHUFD:
	case ZYDIS_MNEMONIC_VPSHUFHW: case ZYDIS_MNEMONIC_VPSHUFLW:
	case ZYDIS_MNEMONIC_VSHUFPS: case ZYDIS_MNEMONIC_VSHUFPD:
	case ZYDIS_MNEMONIC_VSHUFF32X4: case ZYDIS_MNEMONIC_VSHUFF64X2:
	case ZYDIS_MNEMONIC_VSHUFI32X4: case ZYDIS_MNEMONIC_VSHUFI64X2:
	case ZYDIS_MNEMONIC_VPUNPCKLBW: case ZYDIS_MNEMONIC_VPUNPCKHBW:
	case ZYDIS_MNEMONIC_VPUNPCKLWD: case ZYDIS_MNEMONIC_VPUNPCKHWD:
	case ZYDIS_MNEMONIC_VPUNPCKLDQ: case ZYDIS_MNEMONIC_VPUNPCKHDQ:
	case ZYDIS_MNEMONIC_VPUNPCKLQDQ: case ZYDIS_MNEMONIC_VPUNPCKHQDQ:
	case ZYDIS_MNEMONIC_VUNPCKLPS: case ZYDIS_MNEMONIC_VUNPCKHPS:
	case ZYDIS_MNEMONIC_VUNPCKLPD: case ZYDIS_MNEMONIC_VUNPCKHPD:
	case ZYDIS_MNEMONIC_VPACKSSWB: case ZYDIS_MNEMONIC_VPACKSSDW:
	case ZYDIS_MNEMONIC_VPACKUSWB: case ZYDIS_MNEMONIC_VPACKUSDW:
	case ZYDIS_MNEMONIC_VMOVSLDUP: case ZYDIS_MNEMONIC_VMOVSHDUP:
	case ZYDIS_MNEMONIC_VMOVDDUP:
	case ZYDIS_MNEMONIC_VPCONFLICTD: case ZYDIS_MNEMONIC_VPCONFLICTQ:
	case ZYDIS_MNEMONIC_VDBPSADBW: case ZYDIS_MNEMONIC_VPSHUFBITQMB:
	case ZYDIS_MNEMONIC_VPMADDWD: case ZYDIS_MNEMONIC_VPMADDUBSW:
	case ZYDIS_MNEMONIC_VINSERTF32X4: case ZYDIS_MNEMONIC_VINSERTF32X8:
	case ZYDIS_MNEMONIC_VINSERTF64X2: case ZYDIS_MNEMONIC_VINSERTF64X4:
	case ZYDIS_MNEMONIC_VINSERTI32X4: case ZYDIS_MNEMONIC_VINSERTI32X8:
	case ZYDIS_MNEMONIC_VINSERTI64X2: case ZYDIS_MNEMONIC_VINSERTI64X4:
	case ZYDIS_MNEMONIC_VEXTRACTF32X4: case ZYDIS_MNEMONIC_VEXTRACTF32X8:
	case ZYDIS_MNEMONIC_VEXTRACTF64X2: case ZYDIS_MNEMONIC_VEXTRACTF64X4:
	case ZYDIS_MNEMONIC_VEXTRACTI32X4: case ZYDIS_MNEMONIC_VEXTRACTI32X8:
	case ZYDIS_MNEMONIC_VEXTRACTI64X2: case ZYDIS_MNEMONIC_VEXTRACTI64X4:
	case ZYDIS_MNEMONIC_VGF2P8AFFINEQB: case ZYDIS_MNEMONIC_VGF2P8AFFINEINVQB:
	case ZYDIS_MNEMONIC_VPMULTISHIFTQB: case ZYDIS_MNEMONIC_VCVTNE2PS2BF16:
		return true;
	case ZYDIS_MNEMONIC_VPSLLW: case ZYDIS_MNEMONIC_VPSLLD: case ZYDIS_MNEMONIC_VPSLLQ:
	case ZYDIS_MNEMONIC_VPSRLW: case ZYDIS_MNEMONIC_VPSRLD: case ZYDIS_MNEMONIC_VPSRLQ:
	case ZYDIS_MNEMONIC_VPSRAW: case ZYDIS_MNEMONIC_VPSRAD: case ZYDIS_MNEMONIC_VPSRAQ:
		/* the xmm/m128 shift count (not the m512, imm8 element form) */
		return m->size == 128 && in->zi.avx.vector_length != 128;
	default:
		return false;
	}
}

/* AVX-512 {k} masking: memory elements of inactive lanes are not accessed. */
static int plan_evex_masked(struct gb_insn *in, const ZydisDecodedOperand *m)
{
	const ZydisDecodedInstruction *zi = &in->zi;
	struct gb_plan *p = &in->plan;
	bool bcast = zi->avx.broadcast.mode != ZYDIS_BROADCAST_MODE_INVALID;
	unsigned lanes = 0, nelem, elem;
	int err;

	if ((err = ref_of(in, m, op_writes(m), &p->refs[0])))
		return err;
	p->nrefs = 1;
	elem = m->element_size / 8;
	nelem = m->element_count;
	if (!elem || !nelem || elem * nelem != p->refs[0].size) {   /* not element-wise */
		elem = p->refs[0].size;
		nelem = 1;
	}
	/* The mask has one lane per element of the destination: a stored
	 * memory operand's own elements, else the first vector register's. */
	if (op_writes(m))
		lanes = nelem;
	for (int i = 0; !lanes && i < zi->operand_count_visible; i++) {
		const ZydisDecodedOperand *o = &in->ops[i];
		if (o->type == ZYDIS_OPERAND_TYPE_REGISTER && is_vec(o->reg.value))
			lanes = o->element_count;
	}
	if (!lanes)
		lanes = bcast ? zi->avx.vector_length / 8 / elem : nelem;
	if (lanes > 64 || nelem > 64)
		return -EINVAL;

	p->kreg = ZydisRegisterGetId(zi->avx.mask.reg);
	p->elem = elem;
	p->nelem = nelem;
	p->lanes = lanes;
	if (zi->mnemonic == ZYDIS_MNEMONIC_VPCOMPRESSB || zi->mnemonic == ZYDIS_MNEMONIC_VPCOMPRESSW ||
	    zi->mnemonic == ZYDIS_MNEMONIC_VPCOMPRESSD || zi->mnemonic == ZYDIS_MNEMONIC_VPCOMPRESSQ ||
	    zi->mnemonic == ZYDIS_MNEMONIC_VCOMPRESSPS || zi->mnemonic == ZYDIS_MNEMONIC_VCOMPRESSPD ||
	    zi->mnemonic == ZYDIS_MNEMONIC_VPEXPANDB || zi->mnemonic == ZYDIS_MNEMONIC_VPEXPANDW ||
	    zi->mnemonic == ZYDIS_MNEMONIC_VPEXPANDD || zi->mnemonic == ZYDIS_MNEMONIC_VPEXPANDQ ||
	    zi->mnemonic == ZYDIS_MNEMONIC_VEXPANDPS || zi->mnemonic == ZYDIS_MNEMONIC_VEXPANDPD)
		p->kind = GB_PLAN_COMPRESS;
	else
		p->kind = GB_PLAN_MASKED;
	if (nelem == lanes || (nelem == 1 && !bcast))     /* scalar forms: lane 0 */
		p->map = GB_MAP_DIRECT;
	else if (nelem > lanes && nelem % lanes == 0)
		p->map = GB_MAP_GROUP;
	else if (!bcast && lanes % nelem == 0)
		p->map = GB_MAP_SPREAD;
	else
		p->map = GB_MAP_BCAST;
	in->flags |= GB_INSN_NEEDS_VEC;
	return 0;
}

/* Instructions with memory operands that are not memory accesses. */
static bool not_access(const ZydisDecodedInstruction *zi)
{
	switch (zi->meta.category) {
	case ZYDIS_CATEGORY_PREFETCH: case ZYDIS_CATEGORY_PREFETCHWT1:
	case ZYDIS_CATEGORY_NOP: case ZYDIS_CATEGORY_WIDENOP:
	case ZYDIS_CATEGORY_MPX: case ZYDIS_CATEGORY_CLFLUSHOPT:
	case ZYDIS_CATEGORY_CLWB: case ZYDIS_CATEGORY_CLDEMOTE:
	case ZYDIS_CATEGORY_CLZERO:
		return true;
	default:
		break;
	}
	switch (zi->mnemonic) {
	case ZYDIS_MNEMONIC_CLFLUSH: case ZYDIS_MNEMONIC_CLFLUSHOPT:
	case ZYDIS_MNEMONIC_CLWB: case ZYDIS_MNEMONIC_NOP:
	case ZYDIS_MNEMONIC_MONITOR: case ZYDIS_MNEMONIC_MONITORX:
	case ZYDIS_MNEMONIC_UMONITOR:
		return true;
	default:
		return false;
	}
}

/* Every (non-AGEN) memory operand: all reads in operand order, then all
 * writes in operand order (read-modify-write operands read then write;
 * conditional reads and writes are performed by the hardware regardless:
 * cmovcc reads, cmpxchg writes back on failure). */
static int plan_refs(struct gb_insn *in)
{
	struct gb_plan *p = &in->plan;
	int err;

	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < in->zi.operand_count; i++) {
			const ZydisDecodedOperand *o = &in->ops[i];
			ZydisOperandActions want = pass ?
				(ZYDIS_OPERAND_ACTION_WRITE | ZYDIS_OPERAND_ACTION_CONDWRITE) :
				(ZYDIS_OPERAND_ACTION_READ | ZYDIS_OPERAND_ACTION_CONDREAD);
			if (!is_mem(o) || !(o->actions & want))
				continue;
			if (p->nrefs == sizeof(p->refs) / sizeof(p->refs[0]))
				return -EINVAL;
			if ((err = ref_of(in, o, pass, &p->refs[p->nrefs])))
				return err;
			p->nrefs++;
		}
	}
	p->kind = p->nrefs ? GB_PLAN_REFS : GB_PLAN_NONE;
	return 0;
}

int gb_plan_build(struct gb_insn *in)
{
	const ZydisDecodedInstruction *zi = &in->zi;
	struct gb_plan *p = &in->plan;
	const ZydisDecodedOperand *m;
	int err;

	memset(p, 0, sizeof(*p));
	if (not_access(zi))
		return 0;

	switch (zi->mnemonic) {
	case ZYDIS_MNEMONIC_PUSH: case ZYDIS_MNEMONIC_PUSHF:
	case ZYDIS_MNEMONIC_PUSHFD: case ZYDIS_MNEMONIC_PUSHFQ:
	case ZYDIS_MNEMONIC_POP: case ZYDIS_MNEMONIC_POPF:
	case ZYDIS_MNEMONIC_POPFD: case ZYDIS_MNEMONIC_POPFQ:
	case ZYDIS_MNEMONIC_CALL: case ZYDIS_MNEMONIC_RET:
	case ZYDIS_MNEMONIC_IRET: case ZYDIS_MNEMONIC_IRETD: case ZYDIS_MNEMONIC_IRETQ:
	case ZYDIS_MNEMONIC_ENTER: case ZYDIS_MNEMONIC_LEAVE:
		return plan_stack(in);
	case ZYDIS_MNEMONIC_BT: case ZYDIS_MNEMONIC_BTS:
	case ZYDIS_MNEMONIC_BTR: case ZYDIS_MNEMONIC_BTC:
		if (is_mem(&in->ops[0]))
			return plan_bt(in);
		return 0;
	case ZYDIS_MNEMONIC_XSAVE: case ZYDIS_MNEMONIC_XSAVE64:
	case ZYDIS_MNEMONIC_XSAVEOPT: case ZYDIS_MNEMONIC_XSAVEOPT64:
	case ZYDIS_MNEMONIC_XSAVEC: case ZYDIS_MNEMONIC_XSAVEC64:
	case ZYDIS_MNEMONIC_XSAVES: case ZYDIS_MNEMONIC_XSAVES64:
	case ZYDIS_MNEMONIC_XRSTOR: case ZYDIS_MNEMONIC_XRSTOR64:
	case ZYDIS_MNEMONIC_XRSTORS: case ZYDIS_MNEMONIC_XRSTORS64:
		return plan_xsave(in);
	case ZYDIS_MNEMONIC_VMASKMOVPS: case ZYDIS_MNEMONIC_VPMASKMOVD:
		return plan_sign_masked(in, 4);
	case ZYDIS_MNEMONIC_VMASKMOVPD: case ZYDIS_MNEMONIC_VPMASKMOVQ:
		return plan_sign_masked(in, 8);
	case ZYDIS_MNEMONIC_MASKMOVDQU: case ZYDIS_MNEMONIC_VMASKMOVDQU:
		return plan_sign_masked(in, 1);
	case ZYDIS_MNEMONIC_XLAT:
		if ((err = plan_refs(in)))
			return err;
		p->refs[0].index = GB_REG_RAX;
		p->refs[0].scale = 1;
		p->refs[0].flags |= GB_REF_INDEX_AL;
		return 0;
	default:
		break;
	}

	m = mem_op(in);
	if (m && m->mem.type == ZYDIS_MEMOP_TYPE_VSIB)
		return plan_vsib(in, m);
	if (m && zi->encoding == ZYDIS_INSTRUCTION_ENCODING_EVEX &&
	    (zi->avx.mask.mode == ZYDIS_MASK_MODE_MERGING ||
	     zi->avx.mask.mode == ZYDIS_MASK_MODE_ZEROING ||
	     zi->avx.mask.mode == ZYDIS_MASK_MODE_CONTROL ||        /* vpblendm* */
	     zi->avx.mask.mode == ZYDIS_MASK_MODE_CONTROL_ZEROING) &&
	    zi->avx.mask.reg != ZYDIS_REGISTER_K0 && !evex_whole(in, m))
		return plan_evex_masked(in, m);

	if ((err = plan_refs(in)))
		return err;
	if (zi->meta.category == ZYDIS_CATEGORY_STRINGOP && p->nrefs) {
		p->kind = GB_PLAN_STRING;
		if (zi->attributes & (ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE |
				      ZYDIS_ATTRIB_HAS_REPNE)) {
			p->reg = GB_REG_RCX;
			p->reg_bits = zi->address_width;
		}
	}
	return 0;
}
