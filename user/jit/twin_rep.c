/* Counting twins (docs/trace.md "Counting after the budget"): a REP string
 * instruction run natively, all its iterations at once, and counted as its
 * recording block's records would (jit/rep.c: one record per iteration
 * with that iteration's accesses, one without access when rcx is 0).  The
 * iterations are rcx's decrease (repe/repne cmps and scas end early with rcx
 * as far as they got), so the twin adds rcx times each count before the
 * instruction and takes back rcx's value after it; every step flag-free
 * (mov, not, lea, jrcxz), rax kept in T_TWS meanwhile.  It ends its twin
 * block:
 *
 *   TW_RPRE (pc the REP):  mov gs:T_TWS, rax                  o_flg
 *                          per count c: mov rax, gs:C ;
 *                            lea rax, [rax + rcx*k] ; mov gs:C, rax   o_b, o_load, o_commit
 *                          mov rax, gs:T_TWS                  o_sahf1
 *                          jrcxz zero ; jmp8 rep
 *   TW_RZERO (pc the REP): rax saved, one instruction added   (o_b), rax back ;
 *                          jmp <twin of next>
 *   TW_REP (pc the REP):   <the REP>                          (a fault: at_insn)
 *   TW_RPOST (pc next):    jrcxz out ; rax saved ; per count c:
 *                            C = ~(~C + rcx*k) ; rax back      (cmps, scas)
 *   TW_LINK (pc next):     out: jmp <twin of next>
 *
 * A thread stopped anywhere in it is put where the hardware would resume
 * the REP (twin_unwind.c): at the REP with rcx left (what the adds counted
 * for the iterations not run taken back, rcx times each), or after it.
 * k is the iteration's reads and writes (ns_twin_rep_countable). */
#include <errno.h>

#include "decode/plan.h"
#include "jit/internal.h"
#include "jit/twin.h"

bool ns_twin_rep_countable(const struct gb_insn *gi, unsigned *rd, unsigned *wr)
{
	const struct gb_plan *p = &gi->plan;
	*rd = *wr = 0;
	if (!(gi->flags & GB_INSN_REP) || !gb_jit__nostop_supported(gi) || p->kind != GB_PLAN_STRING)
		return false;
	for (unsigned k = 0; k < p->nrefs; k++) {
		if (p->refs[k].flags & GB_REF_INDEX_AL)
			return false;
		++*((p->refs[k].flags & GB_REF_WRITE) ? wr : rd);
	}
	return *rd <= 2 && *wr <= 2; /* (lea's scale) */
}

static const uint8_t NOT_RAX[] = { 0x48, 0xf7, 0xd0 };

/* rax kept in T_TWS over [u->o_flg, u->o_sahf1), and meanwhile
 * gs:C(set, c) += rcx * k[c] (sign +1), or -= (sign -1: by ~(~C + rcx*k)),
 * for each count with a weight (by_rcx false: += k[c]); each add's end in
 * u's o_b, o_load, o_commit (0: none). */
static void adds(struct gb_emit *m, struct unit *u, unsigned set, const uint16_t k[3], int sign,
		 bool by_rcx)
{
	uint32_t *done[3] = { &u->o_b, &u->o_load, &u->o_commit };
	gb_emit_tls_store(m, T_TWS, GB_REG_RAX);
	u->o_flg = (uint32_t)m->used;
	for (unsigned c = 0; c < 3; c++) {
		*done[c] = 0;
		if (!k[c])
			continue;
		int32_t slot = T_CSET(set) + 8 * (int32_t)c;
		gb_emit_tls_load(m, GB_REG_RAX, slot);
		if (sign < 0)
			gb_emit_raw(m, NOT_RAX, sizeof(NOT_RAX));
		if (by_rcx)
			gb_emit_lea(m, GB_REG_RAX, GB_REG_RAX, GB_REG_RCX, (uint8_t)k[c], 0);
		else
			gb_emit_lea(m, GB_REG_RAX, GB_REG_RAX, GB_REG_NONE, 0, k[c]);
		if (sign < 0)
			gb_emit_raw(m, NOT_RAX, sizeof(NOT_RAX));
		gb_emit_tls_store(m, slot, GB_REG_RAX);
		*done[c] = (uint32_t)m->used;
	}
	gb_emit_tls_load(m, GB_REG_RAX, T_TWS);
	u->o_sahf1 = (uint32_t)m->used;
}

static struct unit *piece(struct gb_jit *j, uint8_t tw, uint64_t pc, const uint16_t k[3])
{
	struct unit *u = jit_unit_add(j, U_TWIN, pc);
	if (!u)
		return NULL;
	u->tw = tw;
	for (unsigned c = 0; c < 3; c++)
		u->tb[c] = (int16_t)k[c];
	return u;
}

int ns_twin_rep(struct gb_jit *j, const struct gb_insn *gi, unsigned set, unsigned rd, unsigned wr)
{
	struct gb_emit *m = &j->em;
	const uint16_t k[3] = { 1, (uint16_t)rd, (uint16_t)wr }, one[3] = { 1, 0, 0 };
	uint64_t next = gi->pc + gi->len;
	struct unit *u = piece(j, TW_RPRE, gi->pc, k);
	if (!u)
		return -ENOMEM;
	u->a = false;
	adds(m, u, set, k, 1, true);
	size_t zero = m->used;
	gb_emit_jrcxz(m, gb_emit_here(m) + 2);
	size_t over = m->used;
	gb_emit_jmp8(m, gb_emit_here(m) + 2);
	jit_unit_end(j, u);

	gb_emit_aim8(m, zero, gb_emit_here(m));
	if (!(u = piece(j, TW_RZERO, gi->pc, one)))
		return -ENOMEM;
	u->tgt = next;
	adds(m, u, set, one, 1, false);
	ns_twin_jump_to(j, next);
	jit_unit_end(j, u);

	gb_emit_aim8(m, over, gb_emit_here(m));
	if (!(u = piece(j, TW_REP, gi->pc, k)))
		return -ENOMEM;
	gb_emit_moved(m, gi);
	jit_unit_end(j, u);

	size_t out = 0;
	if (ns_rep_cond(gi) != REP_ALWAYS) { /* (repe/repne: may end early) */
		if (!(u = piece(j, TW_RPOST, next, k)))
			return -ENOMEM;
		out = m->used;
		gb_emit_jrcxz(m, gb_emit_here(m) + 2);
		adds(m, u, set, k, -1, true);
		jit_unit_end(j, u);
		gb_emit_aim8(m, out, gb_emit_here(m));
	}
	if (!(u = jit_unit_add(j, U_TWIN, next)))
		return -ENOMEM;
	u->tw = TW_LINK;
	ns_twin_jump_to(j, next);
	jit_unit_end(j, u);
	return m->err;
}
