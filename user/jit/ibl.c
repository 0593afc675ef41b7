/* The stop-free mode's transfers (docs/trace.md "A trap without stops (in
 * progress)"): calls push the original return address and jump; ret and
 * indirect jmp/call look their target up in a table in the code region and
 * jump to its translated block, or leave for the original target with the
 * lock released.
 *
 * The table is direct-mapped on the target's low 16 bits, keys stored
 * negated (DynamoRIO's indirect branch lookup, flag-free):
 *
 *   mov rcx, <target>            ; (ret: [rsp])
 *   mov rax, TBL/8               ; TBL is 512 KiB-aligned: low 16 bits 0
 *   mov ax, cx                   ; rax = TBL/8 + (target & 0xffff)
 *   mov rdx, [rax*8]             ; -key
 *   lea rcx, [rcx+rdx] ; jrcxz hit
 *
 * rax, rcx, rdx are saved in the thread's area (gs-relative), so a thread
 * leaving the range never needs the shared slots after the release.  Only
 * a miss compares, with the flags saved the way DynamoRIO saves them:
 * lahf; seto al, restored by add al, 0x7f; sahf.  It first looks in the
 * next NS_TBL_PROBES slots (a block whose home slot another block holds
 * is put in the first free one of them: ranges past 64 KiB share slots),
 * then against the range's bounds.
 * A miss inside the range (a target not translated yet) makes a getpid
 * there for gebpf (gb_jit_loc.lookup_miss); with nobody there it goes on as
 * an exit: the target runs natively.  No path writes the stack except what
 * the instruction itself writes (a call's return address at rsp-8). */
#include <errno.h>
#include <string.h>

#include "common/grow.h"
#include "jit/internal.h"

static uint64_t *tbl_view(const struct gb_jit *j) { return (uint64_t *)(j->m.code + (j->tbl - j->m.code_addr)); }

void ns_table_clear(struct gb_jit *j)
{
	memset(tbl_view(j), 0, NS_TBL_BYTES);
	memset(ns_twcol(j), 0, NS_TBL_ENTRIES * 8);
}

void ns_table_put(struct gb_jit *j, uint64_t pc, uint64_t blk)
{
	uint64_t *t = tbl_view(j);
	size_t home = pc & (NS_TBL_ENTRIES - 1), i = home;
	/* its own slot, or the first free one of the chain the lookup's miss
	 * path searches (slots are never freed: the first found is the one);
	 * the chain full, the home slot (the later wins) */
	for (unsigned k = 0; k <= NS_TBL_PROBES; k++, i = (i + 1) & (NS_TBL_ENTRIES - 1))
		if (!t[i] || t[i] == -pc)
			break;
	if (t[i] && t[i] != -pc)
		i = home;
	t[NS_TBL_ENTRIES + i] = blk;
	ns_twcol(j)[i] = ns_twin_pub(j, pc); /* (twin_map.c; 0: none yet) */
	__atomic_store_n(&t[i], -pc, __ATOMIC_RELEASE); /* after its target */
}

static const uint8_t MOV_RCX_RSP0[] = { 0x48, 0x8b, 0x0c, 0x24 };       /* mov rcx, [rsp] */
static const uint8_t MOV_AX_CX[] = { 0x66, 0x89, 0xc8 };
static const uint8_t LEA_RCX_RCX_RDX[] = { 0x48, 0x8d, 0x0c, 0x11 };
static const uint8_t MOV_RSPM8_RAX[] = { 0x48, 0x89, 0x44, 0x24, 0xf8 }; /* mov [rsp-8], rax */
static const uint8_t LEA_RSP_M8[] = { 0x48, 0x8d, 0x64, 0x24, 0xf8 };    /* lea rsp, [rsp-8] */
static const uint8_t CMP_RCX_RDX[] = { 0x48, 0x39, 0xd1 };
static const uint8_t SAVE_FLAGS[] = { 0x9f, 0x0f, 0x90, 0xc0 };           /* lahf ; seto al */
static const uint8_t LOAD_FLAGS[] = { 0x04, 0x7f, 0x9e };                 /* add al, 0x7f ; sahf */

/* mov r, [rax*8 + disp32] (r: rcx or rdx) */
static void load_tbl(struct gb_emit *m, unsigned r, int32_t disp)
{
	uint8_t hw = r == GB_REG_RCX ? 1 : 2;
	uint8_t b[8] = { 0x48, 0x8b, (uint8_t)(0x04 | hw << 3), 0xc5 };
	memcpy(b + 4, &disp, 4);
	gb_emit_raw(m, b, sizeof(b));
}

/* The call's write of its return address (ret): at rsp-8, then rsp moves. */
void ns_push_ret(struct gb_emit *m, uint64_t ret)
{
	gb_emit_tls_store(m, T_RAX, GB_REG_RAX);
	gb_emit_mov_imm64(m, GB_REG_RAX, ret);
	gb_emit_raw(m, MOV_RSPM8_RAX, sizeof(MOV_RSPM8_RAX));
	gb_emit_tls_load(m, GB_REG_RAX, T_RAX);
	gb_emit_raw(m, LEA_RSP_M8, sizeof(LEA_RSP_M8));
}

static int want(struct gb_jit *j, uint64_t pc)
{
	if (!inside(j, pc) || GB_GROW(&j->want, &j->wantcap, j->nwant + 1))
		return inside(j, pc) ? -1 : 0;
	j->want[j->nwant++] = pc;
	return 0;
}

enum xfer { X_RET, X_JMP, X_CALL };

static void restore3(struct gb_emit *m)
{
	gb_emit_tls_load(m, GB_REG_RDX, T_RDX);
	gb_emit_tls_load(m, GB_REG_RAX, T_RAX);
	gb_emit_tls_load(m, GB_REG_RCX, T_RCX);
}

/* rel8 of the short branch ending at offset at, to offset to */
static void rel8_to(struct gb_emit *m, size_t at, size_t to)
{
	if (!m->err)
		m->buf[at - 1] = (uint8_t)(int8_t)((int64_t)to - (int64_t)at);
}

/* The miss path's search of the NS_TBL_PROBES slots after the home slot
 * (the flags saved, rax/rcx/rdx free, the target in T_TGT); found, the
 * flags back and on to the hit path at hit (its T_DST set); else on past
 * it:
 *
 *   mov rax, TBL/8 ; mov ax, gs:[T_TGT] ; mov ecx, NS_TBL_PROBES
 *   next: inc ax ; mov rdx, [rax*8] ; test rdx, rdx ; jz none
 *         add rdx, gs:[T_TGT] ; jz found ; loop next ; jmp none
 *   found: mov rcx, [rax*8 + 512 KiB] ; mov gs:[T_DST], rcx
 *          mov rax, gs:[T_FLG] ; add al, 0x7f ; sahf ; jmp hit
 *   none: */
void ns_probe_chain(struct gb_jit *j, uint64_t hit, int32_t col)
{
	struct gb_emit *m = &j->em;
	static const uint8_t MOV_AX_TGT[] = { 0x65, 0x66, 0x8b, 0x04, 0x25, T_TGT, 0, 0, 0 };
	static const uint8_t INC_AX[] = { 0x66, 0xff, 0xc0 };
	static const uint8_t TEST_RDX[] = { 0x48, 0x85, 0xd2 };
	static const uint8_t ADD_RDX_TGT[] = { 0x65, 0x48, 0x03, 0x14, 0x25, T_TGT, 0, 0, 0 };
	static const uint8_t JZ8[] = { 0x74, 0 }, LOOP8[] = { 0xe2, 0 }, JMP8[] = { 0xeb, 0 };
	gb_emit_mov_imm64(m, GB_REG_RAX, j->tbl / 8);
	gb_emit_raw(m, MOV_AX_TGT, sizeof(MOV_AX_TGT));
	gb_emit_mov_imm32(m, GB_REG_RCX, NS_TBL_PROBES);
	size_t next = m->used;
	gb_emit_raw(m, INC_AX, sizeof(INC_AX));
	load_tbl(m, GB_REG_RDX, 0);
	gb_emit_raw(m, TEST_RDX, sizeof(TEST_RDX));
	gb_emit_raw(m, JZ8, sizeof(JZ8));
	size_t to_none1 = m->used;
	gb_emit_raw(m, ADD_RDX_TGT, sizeof(ADD_RDX_TGT));
	gb_emit_raw(m, JZ8, sizeof(JZ8));
	size_t to_found = m->used;
	gb_emit_raw(m, LOOP8, sizeof(LOOP8));
	rel8_to(m, m->used, next);
	gb_emit_raw(m, JMP8, sizeof(JMP8));
	size_t to_none2 = m->used;
	rel8_to(m, to_found, m->used);
	load_tbl(m, GB_REG_RCX, col);
	size_t to_none3 = 0;
	if (col != (int32_t)(NS_TBL_ENTRIES * 8)) { /* twins: a block whose twin is not made yet */
		gb_emit_jrcxz(m, gb_emit_here(m) + 2);
		to_none3 = m->used;
	}
	gb_emit_tls_store(m, T_DST, GB_REG_RCX);
	gb_emit_tls_load(m, GB_REG_RAX, T_FLG);
	gb_emit_raw(m, LOAD_FLAGS, sizeof(LOAD_FLAGS));
	gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, hit);
	rel8_to(m, to_none1, m->used);
	rel8_to(m, to_none2, m->used);
	if (to_none3)
		rel8_to(m, to_none3, m->used);
}

static void lookup(struct gb_jit *j, const struct gb_insn *gi, enum xfer x, struct unit *u)
{
	struct gb_emit *m = &j->em;
	uint64_t next = gi->pc + gi->len;
	int64_t pop = 8 + (x == X_RET && gi->zi.operand_count_visible ? gi->ops[0].imm.value.s : 0);
	gb_emit_tls_store(m, T_RCX, GB_REG_RCX);
	gb_emit_tls_store(m, T_RAX, GB_REG_RAX);
	gb_emit_tls_store(m, T_RDX, GB_REG_RDX);
	if (x == X_RET)
		gb_emit_raw(m, MOV_RCX_RSP0, sizeof(MOV_RCX_RSP0));
	else
		gb_emit_load_target(m, GB_REG_RCX, gi);
	gb_emit_tls_store(m, T_TGT, GB_REG_RCX);
	uint64_t look = gb_emit_here(m);
	gb_emit_mov_imm64(m, GB_REG_RAX, j->tbl / 8);
	gb_emit_raw(m, MOV_AX_CX, sizeof(MOV_AX_CX));
	load_tbl(m, GB_REG_RDX, 0);
	gb_emit_raw(m, LEA_RCX_RCX_RDX, sizeof(LEA_RCX_RCX_RDX));
	gb_emit_jrcxz(m, gb_emit_here(m) + 2 + 5);
	size_t to_miss = gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, gb_emit_here(m));
	/* hit: the translated block, the lock kept */
	load_tbl(m, GB_REG_RCX, (int32_t)(NS_TBL_ENTRIES * 8));
	gb_emit_tls_store(m, T_DST, GB_REG_RCX);
	uint64_t hit = gb_emit_here(m); /* (a hit further in the chain too) */
	restore3(m);
	if (x == X_RET)
		gb_emit_lea(m, GB_REG_RSP, GB_REG_RSP, GB_REG_NONE, 0, pop);
	else if (x == X_CALL)
		ns_push_ret(m, next);
	u->o_hit = (uint32_t)m->used;
	gb_emit_tls_jmp(m, T_DST);
	/* miss: inside the range? */
	if (!m->err)
		gb_emit_repoint(m, to_miss, gb_emit_here(m));
	gb_emit_raw(m, SAVE_FLAGS, sizeof(SAVE_FLAGS));
	gb_emit_tls_store(m, T_FLG, GB_REG_RAX);
	u->o_flg = (uint32_t)m->used;
	ns_probe_chain(j, hit, (int32_t)(NS_TBL_ENTRIES * 8));
	gb_emit_tls_load(m, GB_REG_RCX, T_TGT);
	gb_emit_mov_imm64(m, GB_REG_RDX, j->start);
	gb_emit_raw(m, CMP_RCX_RDX, sizeof(CMP_RCX_RDX));
	size_t below = gb_emit_jump(m, ZYDIS_MNEMONIC_JB, gb_emit_here(m));
	gb_emit_mov_imm64(m, GB_REG_RDX, j->end);
	gb_emit_raw(m, CMP_RCX_RDX, sizeof(CMP_RCX_RDX));
	size_t above = gb_emit_jump(m, ZYDIS_MNEMONIC_JNBE, gb_emit_here(m));
	/* in the range, not translated: counted and logged, a stop for gebpf,
	 * then on as an exit */
	ns_log_miss(j, GB_REG_RDX);
	gb_emit_tls_load(m, GB_REG_RAX, T_FLG);
	gb_emit_raw(m, LOAD_FLAGS, sizeof(LOAD_FLAGS));
	u->o_sahf1 = (uint32_t)m->used;
	gb_emit_tls_store(m, T_R11, GB_REG_R11);
	gb_emit_mov_imm32(m, GB_REG_RAX, 39 /* getpid */);
	gb_emit_syscall(m);
	u->o_insn = (uint32_t)m->used;
	gb_emit_tls_load(m, GB_REG_R11, T_R11);
	size_t to_out = gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, gb_emit_here(m));
	u->o_retry = (uint32_t)m->used; /* after gebpf translated the target */
	gb_emit_tls_load(m, GB_REG_R11, T_R11);
	gb_emit_tls_load(m, GB_REG_RCX, T_TGT);
	gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, look);
	/* out of the range */
	if (!m->err) {
		gb_emit_repoint(m, below, gb_emit_here(m));
		gb_emit_repoint(m, above, gb_emit_here(m));
	}
	u->o_out = (uint32_t)m->used;
	gb_emit_tls_load(m, GB_REG_RAX, T_FLG);
	gb_emit_raw(m, LOAD_FLAGS, sizeof(LOAD_FLAGS));
	u->o_sahf2 = (uint32_t)m->used;
	if (!m->err)
		gb_emit_repoint(m, to_out, gb_emit_here(m));
	restore3(m);
	if (x == X_CALL)
		ns_push_ret(m, next);
	u->o_rel = (uint32_t)m->used;
	ns_release(j);
	if (x == X_RET)
		gb_emit_lea(m, GB_REG_RSP, GB_REG_RSP, GB_REG_NONE, 0, pop);
	gb_emit_tls_jmp(m, T_TGT);
}

void ns_log_miss(struct gb_jit *j, unsigned t)
{
	struct gb_emit *m = &j->em;
	static const uint8_t MOVZX_EAX_AL[] = { 0x0f, 0xb6, 0xc0 };
	static const uint8_t hw[GB_REG_COUNT] = { 0, 3, 1, 2, 6, 7, 5, 4, 0, 1, 2, 3, 4, 5, 6, 7 };
	/* mov [t + rax*8], rcx */
	const uint8_t store[] = { t >= GB_REG_R8 ? 0x49 : 0x48, 0x89, 0x0c, (uint8_t)(0xc0 | hw[t]) };
	gb_emit_load(m, GB_REG_RAX, daddr(j, NS_MISSES));
	gb_emit_lea(m, t, GB_REG_RAX, GB_REG_NONE, 0, 1);
	gb_emit_store(m, daddr(j, NS_MISSES), t);
	gb_emit_raw(m, MOVZX_EAX_AL, sizeof(MOVZX_EAX_AL));
	gb_emit_lea_rip(m, t, daddr(j, NS_MISSLOG));
	gb_emit_raw(m, store, sizeof(store));
}

static bool direct(const struct gb_insn *gi)
{
	return gi->ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && gi->ops[0].imm.is_relative;
}

int ns_transfer(struct gb_jit *j, const struct gb_insn *gi, struct link *l)
{
	struct gb_emit *m = &j->em;
	uint64_t next = gi->pc + gi->len;
	struct unit *u = jit_unit_add(j, U_NS, gi->pc);
	if (!u)
		return -1;
	int linked = 0;
	if (gi->zi.mnemonic == ZYDIS_MNEMONIC_CALL && direct(gi)) {
		uint64_t tgt = next + (uint64_t)gi->zi.raw.imm[0].value.s;
		u->ns = GB_JIT_NS_EXIT;
		u->tgt = tgt;
		ns_push_ret(m, next);
		u->o_insn = (uint32_t)m->used;
		if (inside(j, tgt)) {
			*l = (struct link){ ZYDIS_MNEMONIC_JMP, tgt,
					    (uint32_t)gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, gb_emit_here(m)) };
			linked = 1;
		} else {
			ns_leave(j, tgt);
		}
	} else {
		u->ns = GB_JIT_NS_LOOKUP;
		enum xfer x = gi->zi.mnemonic == ZYDIS_MNEMONIC_RET ? X_RET :
			      gi->zi.mnemonic == ZYDIS_MNEMONIC_JMP ? X_JMP : X_CALL;
		if (x == X_RET) /* its pop (unwind.c) */
			u->tgt = (uint64_t)(8 + (gi->zi.operand_count_visible ? gi->ops[0].imm.value.s : 0));
		lookup(j, gi, x, u);
	}
	jit_unit_end(j, u);
	if (gi->zi.mnemonic == ZYDIS_MNEMONIC_CALL && want(j, next))
		return -1;
	return m->err ? -1 : linked;
}
