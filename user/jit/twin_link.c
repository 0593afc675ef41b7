/* Counting twins (docs/trace.md "Counting after the budget"): a twin's
 * ways out of its block: a jump to the twin of its target (or, none yet,
 * left for the pass to resolve: twin.c), a call's push of the original
 * return address, the lookup of a ret or an indirect target in the
 * table's twin column, and the stub of a target no twin can be made for
 * (counted and logged at NS_TMISSES / NS_TMISSLOG, then on natively).
 * twin_block.c emits the rest of a block's twin; the map of the twins made
 * is twin_map.c's; the pieces' kinds are in twin.h. */
#include <errno.h>
#include <string.h>

#include "common/grow.h"
#include "jit/internal.h"
#include "jit/twin.h"

/* --- a twin's ways out --- */

static const uint8_t SAVE_FLAGS[] = { 0x9f, 0x0f, 0x90, 0xc0 };    /* lahf ; seto al */
static const uint8_t LOAD_FLAGS[] = { 0x04, 0x7f, 0x9e };          /* add al, 0x7f ; sahf */

/* A jump (its rel32 at src) to the twin of target, or out of the range. */
void ns_twin_link_to(struct gb_jit *j, size_t src, uint64_t target)
{
	uint64_t t = inside(j, target) ? ns_twin_of(j, target, NULL) : target;
	if (t) {
		gb_emit_repoint(&j->em, src, t);
		return;
	}
	if (GB_GROW(&j->tl, &j->tlcap, j->ntl + 1) || ns_twin_want_add(j, target)) {
		j->em.err = -ENOMEM;
		return;
	}
	j->tl[j->ntl++] = (struct twlink){ (uint32_t)src, target };
}

void ns_twin_jump_to(struct gb_jit *j, uint64_t target)
{
	size_t src = gb_emit_jump(&j->em, ZYDIS_MNEMONIC_JMP, gb_emit_here(&j->em));
	if (!j->em.err)
		ns_twin_link_to(j, src, target);
}

/* A call's push of its original return address, offsets in u: rax saved
 * (o_b), back (o_load), rsp moved (o_insn). */
void ns_twin_push_ret(struct gb_jit *j, struct unit *u, uint64_t ret)
{
	static const uint8_t MOV_RSPM8_RAX[] = { 0x48, 0x89, 0x44, 0x24, 0xf8 };
	static const uint8_t LEA_RSP_M8[] = { 0x48, 0x8d, 0x64, 0x24, 0xf8 };
	struct gb_emit *m = &j->em;
	gb_emit_tls_store(m, T_RAX, GB_REG_RAX);
	u->o_b = (uint32_t)m->used;
	gb_emit_mov_imm64(m, GB_REG_RAX, ret);
	gb_emit_raw(m, MOV_RSPM8_RAX, sizeof(MOV_RSPM8_RAX));
	gb_emit_tls_load(m, GB_REG_RAX, T_RAX);
	u->o_load = (uint32_t)m->used;
	gb_emit_raw(m, LEA_RSP_M8, sizeof(LEA_RSP_M8));
	u->o_insn = (uint32_t)m->used;
}

static void restore3(struct gb_emit *m)
{
	gb_emit_tls_load(m, GB_REG_RDX, T_RDX);
	gb_emit_tls_load(m, GB_REG_RAX, T_RAX);
	gb_emit_tls_load(m, GB_REG_RCX, T_RCX);
}

/* Count and log the missed target in rcx (rax, rdx, the flags clobbered:
 * saved by the caller):
 *   mov eax, 1 ; lock xadd [NS_TMISSES], rax ; and eax, 127
 *   lea rdx, [NS_TMISSLOG] ; mov [rdx+rax*8], rcx */
static void log_miss(struct gb_jit *j)
{
	struct gb_emit *m = &j->em;
	static const uint8_t AND_EAX[] = { 0x83, 0xe0, NS_TMISSLOG_N - 1 };
	static const uint8_t STORE[] = { 0x48, 0x89, 0x0c, 0xc2 };
	gb_emit_mov_imm32(m, GB_REG_RAX, 1);
	int64_t d = (int64_t)(daddr(j, NS_TMISSES) - (gb_emit_here(m) + 9));
	int32_t d32 = (int32_t)d;
	uint8_t x[9] = { 0xf0, 0x48, 0x0f, 0xc1, 0x05 };
	if (d != d32) {
		m->err = -EINVAL;
		return;
	}
	memcpy(x + 5, &d32, 4);
	gb_emit_raw(m, x, sizeof(x));
	gb_emit_raw(m, AND_EAX, sizeof(AND_EAX));
	gb_emit_lea_rip(m, GB_REG_RDX, daddr(j, NS_TMISSLOG));
	gb_emit_raw(m, STORE, sizeof(STORE));
}

/* A jump to an in-range target no twin can be made for: counted and
 * logged, then on natively (as a recording exit stub does). */
uint64_t ns_twin_miss_stub(struct gb_jit *j, uint64_t target)
{
	struct gb_emit *m = &j->em;
	uint64_t at = gb_emit_here(m);
	struct unit *u = jit_unit_add(j, U_TWIN, target);
	if (!u)
		return 0;
	u->tw = TW_MISS;
	gb_emit_tls_store(m, T_RCX, GB_REG_RCX);
	gb_emit_tls_store(m, T_RAX, GB_REG_RAX);
	gb_emit_tls_store(m, T_RDX, GB_REG_RDX);
	gb_emit_raw(m, SAVE_FLAGS, sizeof(SAVE_FLAGS));
	gb_emit_tls_store(m, T_FLG, GB_REG_RAX);
	u->o_flg = (uint32_t)m->used;
	gb_emit_mov_imm64(m, GB_REG_RCX, target);
	log_miss(j);
	gb_emit_tls_load(m, GB_REG_RAX, T_FLG);
	gb_emit_raw(m, LOAD_FLAGS, sizeof(LOAD_FLAGS));
	u->o_sahf2 = (uint32_t)m->used;
	restore3(m);
	gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, target);
	jit_unit_end(j, u);
	return at;
}

/* ret / indirect jmp / call: the lookup of ibl.c in the table's twin
 * column (see its comment), with no lock to release on the way out:
 *
 *   mov gs:[T_RCX], rcx ; mov gs:[T_RAX], rax ; mov gs:[T_RDX], rdx
 *   mov rcx, <target> ; mov gs:[T_TGT], rcx
 *   mov rax, TBL/8 ; mov ax, cx ; mov rdx, [rax*8] ; lea rcx, [rcx+rdx]
 *   jrcxz hit ; jmp miss
 *   hit:  mov rcx, [rax*8 + TWIN] ; jrcxz miss ; mov gs:[T_DST], rcx
 *   hit2: restore ; <ret: lea rsp / call: the push>
 *   o_hit: jmp gs:[T_DST]
 *   miss: lahf ; seto al ; mov gs:[T_FLG], rax ; the probe chain (to hit2)
 *         in the range: counted and logged
 *   out:  flags back ; restore ; <ret: lea rsp / call: the push>
 *   o_rel: jmp gs:[T_TGT] */
void ns_twin_lookup(struct gb_jit *j, const struct gb_insn *gi, struct unit *u)
{
	static const uint8_t MOV_RCX_RSP0[] = { 0x48, 0x8b, 0x0c, 0x24 };
	static const uint8_t MOV_AX_CX[] = { 0x66, 0x89, 0xc8 };
	static const uint8_t LEA_RCX_RCX_RDX[] = { 0x48, 0x8d, 0x0c, 0x11 };
	static const uint8_t CMP_RCX_RDX[] = { 0x48, 0x39, 0xd1 };
	static const uint8_t LOAD_KEY[] = { 0x48, 0x8b, 0x14, 0xc5, 0, 0, 0, 0 };  /* mov rdx, [rax*8] */
	uint8_t LOAD_TWIN[8] = { 0x48, 0x8b, 0x0c, 0xc5 }; /* mov rcx, [rax*8 + the twin column] */
	int32_t twd = ns_twcol_disp(j);
	memcpy(LOAD_TWIN + 4, &twd, 4);
	struct gb_emit *m = &j->em;
	bool ret = gi->zi.mnemonic == ZYDIS_MNEMONIC_RET, call = gi->zi.mnemonic == ZYDIS_MNEMONIC_CALL;
	uint64_t next = gi->pc + gi->len;
	int64_t pop = 8 + (ret && gi->zi.operand_count_visible ? gi->ops[0].imm.value.s : 0);
	struct unit scratch;
	gb_emit_tls_store(m, T_RCX, GB_REG_RCX);
	gb_emit_tls_store(m, T_RAX, GB_REG_RAX);
	gb_emit_tls_store(m, T_RDX, GB_REG_RDX);
	if (ret)
		gb_emit_raw(m, MOV_RCX_RSP0, sizeof(MOV_RCX_RSP0));
	else
		gb_emit_load_target(m, GB_REG_RCX, gi);
	gb_emit_tls_store(m, T_TGT, GB_REG_RCX);
	gb_emit_mov_imm64(m, GB_REG_RAX, j->tbl / 8);
	gb_emit_raw(m, MOV_AX_CX, sizeof(MOV_AX_CX));
	gb_emit_raw(m, LOAD_KEY, sizeof(LOAD_KEY));
	gb_emit_raw(m, LEA_RCX_RCX_RDX, sizeof(LEA_RCX_RCX_RDX));
	gb_emit_jrcxz(m, gb_emit_here(m) + 2 + 5);
	size_t to_miss = gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, gb_emit_here(m));
	gb_emit_raw(m, LOAD_TWIN, sizeof(LOAD_TWIN));
	size_t to_miss2 = m->used;
	gb_emit_jrcxz(m, gb_emit_here(m) + 2);
	gb_emit_tls_store(m, T_DST, GB_REG_RCX);
	uint64_t hit2 = gb_emit_here(m);
	restore3(m);
	if (ret)
		gb_emit_lea(m, GB_REG_RSP, GB_REG_RSP, GB_REG_NONE, 0, pop);
	else if (call)
		ns_twin_push_ret(j, &scratch, next);
	u->o_hit = (uint32_t)m->used;
	gb_emit_tls_jmp(m, T_DST);
	/* miss */
	if (!m->err) {
		gb_emit_repoint(m, to_miss, gb_emit_here(m));
		if (m->used - (to_miss2 + 2) > 127)
			m->err = -EINVAL;
		else
			m->buf[to_miss2 + 1] = (uint8_t)(m->used - (to_miss2 + 2));
	}
	gb_emit_raw(m, SAVE_FLAGS, sizeof(SAVE_FLAGS));
	gb_emit_tls_store(m, T_FLG, GB_REG_RAX);
	u->o_flg = (uint32_t)m->used;
	ns_probe_chain(j, hit2, twd);
	gb_emit_tls_load(m, GB_REG_RCX, T_TGT);
	gb_emit_mov_imm64(m, GB_REG_RDX, j->start);
	gb_emit_raw(m, CMP_RCX_RDX, sizeof(CMP_RCX_RDX));
	size_t below = gb_emit_jump(m, ZYDIS_MNEMONIC_JB, gb_emit_here(m));
	gb_emit_mov_imm64(m, GB_REG_RDX, j->end);
	gb_emit_raw(m, CMP_RCX_RDX, sizeof(CMP_RCX_RDX));
	size_t above = gb_emit_jump(m, ZYDIS_MNEMONIC_JNBE, gb_emit_here(m));
	log_miss(j); /* in the range, no twin: on natively */
	if (!m->err) {
		gb_emit_repoint(m, below, gb_emit_here(m));
		gb_emit_repoint(m, above, gb_emit_here(m));
	}
	u->o_out = (uint32_t)m->used;
	gb_emit_tls_store(m, T_EXIT, GB_REG_RCX); /* (gebpf learns it: gb_jit__learn_exits) */
	gb_emit_tls_load(m, GB_REG_RAX, T_FLG);
	gb_emit_raw(m, LOAD_FLAGS, sizeof(LOAD_FLAGS));
	u->o_sahf2 = (uint32_t)m->used;
	restore3(m);
	if (ret)
		gb_emit_lea(m, GB_REG_RSP, GB_REG_RSP, GB_REG_NONE, 0, pop);
	else if (call)
		ns_twin_push_ret(j, &scratch, next);
	u->o_rel = (uint32_t)m->used;
	gb_emit_tls_jmp(m, T_TGT);
}
