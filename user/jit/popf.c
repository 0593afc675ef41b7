/* popf in the stop-free mode (docs/trace.md "A trap without stops"): the
 * copy runs as is unless the value it pops sets TF.  Such a popf would make
 * the next #DB fire inside the cache's own code (one original instruction
 * early, then at every cache instruction), so the thread leaves for the
 * original popf instead, through an exit stub that counts and logs the
 * miss (the trace is not exact from there until the next entry: gebpf says
 * so).  The check is flag-free: TF is bit 0 of the popped value's second
 * byte, turned into 0/1 by a 256-byte table of the data part (NS_TFBIT).
 *
 *   mov [slot rcx], rcx ; mov [slot rax], rax      U_CHECK
 *   movzx ecx, byte [rsp+1]
 *   lea rax, [tbl] ; movzx ecx, byte [rax+rcx]
 *   mov rax, [slot rax]
 *   jrcxz 1f ; jmp 2f
 *1: jmp ok
 *2: mov rcx, [slot rcx]
 *   <exit stub to the popf>                         U_STUB
 *ok: mov rcx, [slot rcx]                            U_CHECK (rcx saved)
 *   <the popf's record and copy>                    U_INSN
 */
#include <errno.h>

#include "jit/internal.h"

bool ns_is_popf(const struct gb_insn *gi)
{
	return gi->zi.mnemonic == ZYDIS_MNEMONIC_POPF || gi->zi.mnemonic == ZYDIS_MNEMONIC_POPFQ;
}

void ns_popf_table(struct gb_jit *j)
{
	for (unsigned b = 0; b < 256; b++)
		j->m.data[NS_TFBIT + b] = (uint8_t)(b & 1);
}

static const uint8_t movzx_tf[] = { 0x0f, 0xb6, 0x4c, 0x24, 0x01 };   /* movzx ecx, byte [rsp+1] */
static const uint8_t movzx_tbl[] = { 0x0f, 0xb6, 0x0c, 0x08 };        /* movzx ecx, byte [rax+rcx] */

void ns_popf_check(struct gb_jit *j, const struct gb_insn *gi)
{
	struct gb_emit *m = &j->em;
	struct unit *c = jit_unit_add(j, U_CHECK, gi->pc);
	if (!c) {
		m->err = m->err ? m->err : -ENOMEM;
		return;
	}
	gb_emit_store(m, daddr(j, SLOT(GB_REG_RCX)), GB_REG_RCX);
	c->o_b = (uint32_t)m->used;
	gb_emit_store(m, daddr(j, SLOT(GB_REG_RAX)), GB_REG_RAX);
	gb_emit_raw(m, movzx_tf, sizeof(movzx_tf));
	gb_emit_lea_rip(m, GB_REG_RAX, daddr(j, NS_TFBIT));
	gb_emit_raw(m, movzx_tbl, sizeof(movzx_tbl));
	gb_emit_load(m, GB_REG_RAX, daddr(j, SLOT(GB_REG_RAX)));
	uint64_t at = gb_emit_here(m);
	gb_emit_jrcxz(m, at + 4);
	gb_emit_jmp8(m, at + 4 + 5);
	size_t to_ok = gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, gb_emit_here(m));
	gb_emit_load(m, GB_REG_RCX, daddr(j, SLOT(GB_REG_RCX)));
	jit_unit_end(j, c);
	jit_stub(j, gi->pc, UINT32_MAX, 0);
	struct unit *ok = jit_unit_add(j, U_CHECK, gi->pc);
	if (!ok) {
		m->err = m->err ? m->err : -ENOMEM;
		return;
	}
	ok->a = 1; /* rcx in its slot from the start */
	ok->o_b = UINT32_MAX;
	if (!m->err)
		gb_emit_repoint(m, to_ok, gb_emit_here(m));
	gb_emit_load(m, GB_REG_RCX, daddr(j, SLOT(GB_REG_RCX)));
	jit_unit_end(j, ok);
}
