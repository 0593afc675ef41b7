/* REP string instructions in the stop-free mode (docs/trace.md "A trap
 * without stops"): run one iteration at a time, as single-stepping sees
 * them (one record per iteration with that iteration's accesses, one
 * record without access when rcx is 0).  Such an instruction is a block of
 * its own (the block before it ends there):
 *
 *   head:  the block's budget check (one pass of the ring's budget per
 *          iteration: a loop of any count never overruns the ring)
 *          jrcxz zero                       U_LINK (pc): nothing done yet
 *          record: id, then its addresses   U_INSN (the iteration's)
 *          <the instruction, REP removed>   one iteration (DF as it is)
 *          lea rcx, [rcx-1]                 U_REP: the iteration done
 *          jrcxz done
 *          jne/je done                      (repe/repne cmps, scas)
 *          jmp head
 *   zero:  record: the zero id              U_INSN (nrefs 0)
 *   done:  jmp <next>                       the block's fall-through link
 *
 * A thread stopped anywhere in it unwinds as the hardware resumes a REP:
 * rip the instruction with rcx, rsi and rdi as after the iterations done,
 * or the next instruction once the last one is (unwind.c). */
#include <errno.h>

#include "jit/internal.h"

enum rep_cond ns_rep_cond(const struct gb_insn *gi)
{
	switch (gi->zi.mnemonic) {
	case ZYDIS_MNEMONIC_CMPSB: case ZYDIS_MNEMONIC_CMPSW: case ZYDIS_MNEMONIC_CMPSD:
	case ZYDIS_MNEMONIC_CMPSQ: case ZYDIS_MNEMONIC_SCASB: case ZYDIS_MNEMONIC_SCASW:
	case ZYDIS_MNEMONIC_SCASD: case ZYDIS_MNEMONIC_SCASQ:
		return gi->zi.attributes & ZYDIS_ATTRIB_HAS_REPNE ? REP_WHILE_NZ : REP_WHILE_ZF;
	default:
		return REP_ALWAYS;
	}
}

int ns_rep(struct gb_jit *j, const struct gb_insn *gi, uint64_t head)
{
	struct gb_emit *m = &j->em;
	/* the instruction without its F2/F3 prefix (among the legacy prefixes,
	 * before any REX) */
	uint8_t b[GB_INSN_MAX_LEN];
	size_t n = 0;
	for (size_t k = 0; k < gi->len; k++)
		if (k >= gi->zi.raw.prefix_count || (gi->bytes[k] != 0xf2 && gi->bytes[k] != 0xf3))
			b[n++] = gi->bytes[k];
	if (n == gi->len)
		return -1;

	struct unit *l = jit_unit_add(j, U_LINK, gi->pc);
	if (!l)
		return -1;
	size_t to_zero = m->used;
	gb_emit_jrcxz(m, gb_emit_here(m) + 2);
	jit_unit_end(j, l);
	if (jit_one(j, gi, false) < 0)
		return -1;
	gb_emit_raw(m, b, n);
	jit_unit_end(j, &j->u[j->nu - 1]);

	struct unit *t = jit_unit_add(j, U_REP, gi->pc);
	if (!t)
		return -1;
	enum rep_cond c = ns_rep_cond(gi);
	t->a = (uint8_t)c;
	t->tgt = gi->pc + gi->len;
	gb_emit_lea(m, GB_REG_RCX, GB_REG_RCX, GB_REG_NONE, 0, -1);
	t->o_insn = (uint32_t)m->used;
	size_t to_done = m->used, cc = 0;
	gb_emit_jrcxz(m, gb_emit_here(m) + 2);
	if (c != REP_ALWAYS)
		cc = gb_emit_jump(m, c == REP_WHILE_ZF ? ZYDIS_MNEMONIC_JNZ : ZYDIS_MNEMONIC_JZ,
				  gb_emit_here(m));
	gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, head);
	jit_unit_end(j, t);

	uint64_t zero = gb_emit_here(m);
	if (jit_one(j, gi, true) < 0)
		return -1;
	jit_unit_end(j, &j->u[j->nu - 1]);
	uint64_t done = gb_emit_here(m);
	gb_emit_aim8(m, to_zero, zero);
	gb_emit_aim8(m, to_done, done);
	if (cc && !m->err)
		gb_emit_repoint(m, cc, done);
	return m->err ? -1 : 0;
}
