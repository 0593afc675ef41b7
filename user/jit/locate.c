/* Where a thread in the code region is, in original terms: see jit.h
 * (gb_jit__locate). */
#include <errno.h>
#include <string.h>

#include "common/bound.h"
#include "jit/internal.h"
#include "jit/twin.h"

bool gb_jit__in_code(const struct gb_jit *j, uint64_t rip)
{
	return rip >= j->m.code_addr && rip < j->m.code_addr + j->em.used;
}

uint64_t gb_jit__saved(const struct gb_jit *j, unsigned r) { return *dword(j, SLOT(r)); }

int gb_jit__locate(const struct gb_jit *j, uint64_t rip, struct gb_jit_loc *out)
{
	memset(out, 0, sizeof(*out));
	if (!gb_jit__in_code(j, rip))
		return -ENOENT;
	uint64_t off = rip - j->m.code_addr;
	size_t lo = GB_UPPER(j->u, j->nu, off, off); /* the unit is the last with u.off <= off */
	if (!lo || off >= j->u[lo - 1].end)
		return -ENOENT;
	const struct unit *u = &j->u[lo - 1];
	out->pc = u->pc;
	switch (u->kind) {
	case U_HEAD:
		if (off > u->off)
			out->restore = 1u << GB_REG_RCX;
		return 0;
	case U_CHECK:
		if (off > u->off || u->a)
			out->restore |= 1u << GB_REG_RCX;
		if (off > u->o_b)
			out->restore |= 1u << GB_REG_RAX;
		return 0;
	case U_LINK:
	case U_REP: /* (unwind.c says where in the loop) */
		return 0;
	case U_TWIN: /* (twin_unwind.c says where) */
		out->twin = true;
		out->at_insn = (u->tw == TW_INSN || u->tw == TW_REP) && off == u->off;
		return 0;
	case U_STUB: {
		static const uint8_t saved[] = { GB_REG_RAX, GB_REG_RCX, GB_REG_R11 };
		for (unsigned k = 0; k < 3; k++)
			if (off > u->off + 7 * k) /* each save is 7 bytes */
				out->restore |= 1u << saved[k];
		out->stub = true;
		out->stub_call = off == u->o_insn;
		out->emulate = u->emu;
		/* the instruction it stands for has its record: not run yet */
		out->unwrite = u->emu ? u->words : 0;
		return 0;
	}
	case U_NS:
		/* Stop-free mode: the registers a piece saved are in the
		 * thread's area; mapping a stop inside one back is the trap's
		 * (docs/trace.md "A trap without stops"). */
		out->ns = u->ns;
		if (u->ns == GB_JIT_NS_LOOKUP && off == u->o_insn) {
			out->lookup_miss = true;
			out->retry = j->m.code_addr + u->o_retry;
		}
		return 0;
	case U_INSN:
		if (off > u->off)
			out->restore |= 1u << u->a;
		if (off > u->o_b && u->b != GB_REG_NONE)
			out->restore |= 1u << u->b;
		if (off > u->o_c && u->c != GB_REG_NONE)
			out->restore |= 1u << u->c;
		if (off >= u->o_commit)
			out->unwrite = u->words;
		/* (rip is never inside the copy; a load of a read's value,
		 * --values, faults where the instruction would) */
		out->at_insn = off == u->o_insn || (off >= u->o_pre && off < u->o_pre_end);
		return 0;
	case U_POST: { /* (vals.c) the instruction ran: on after it */
		const uint8_t r[4] = { u->a, u->b, u->c, u->d };
		const uint32_t o[4] = { u->off, u->o_b, u->o_c, u->o_d };
		for (unsigned k = 0; k < 4; k++)
			if (off > o[k] && r[k] != GB_REG_NONE)
				out->restore |= 1u << r[k];
		out->post = true;
		return 0;
	}
	}
	return -ENOENT;
}

