/* Counting mode, gebpf's side (docs/trace.md "Counting after the budget"):
 * the switch, the harvest of the areas' counts, the twins' misses, and a
 * thread stopped in a twin put back at its original instruction with the
 * counts its block's head added for what it has not run taken back from
 * its area (so its re-entry, after a signal handler, does not count them
 * twice).  twin.c, twin_block.c and twin_link.c make the twins; the
 * piece kinds are in twin.h. */
#include <string.h>
#include <sys/user.h>

#include "jit/internal.h"
#include "jit/twin.h"

#define TLS_OP 9    /* mov gs:[disp32], r / mov r, gs:[disp32] */

void gb_jit__counting(struct gb_jit *j, bool on)
{
	if (j->o.nostop && j->o.twins)
		__atomic_store_n(j->m.data + NS_COUNT, on, __ATOMIC_RELEASE);
}

bool gb_jit__is_counting(const struct gb_jit *j)
{
	return j->o.nostop && __atomic_load_n(j->m.data + NS_COUNT, __ATOMIC_ACQUIRE);
}

static uint64_t *cnt(struct gb_jit *j, unsigned k, unsigned set, unsigned c)
{
	return (uint64_t *)(j->m.data + NS_TLS + (size_t)k * GB_JIT_TLS_SIZE + T_CSET(set) + 8 * c);
}

static uint64_t *bcnt(struct gb_jit *j, unsigned k, unsigned b)
{
	return (uint64_t *)(j->m.data + NS_TLS + (size_t)k * GB_JIT_TLS_SIZE + T_BLK + 8 * b);
}

/* Area k's counts so far: its sets, and its block counters by their
 * weights (modulo 2^64, as the differences are taken). */
static void totals(struct gb_jit *j, unsigned k, uint64_t v[3])
{
	v[0] = v[1] = v[2] = 0;
	for (unsigned c = 0; c < 3; c++)
		for (unsigned s = 0; s < NS_CSETS; s++)
			v[c] += __atomic_load_n(cnt(j, k, s, c), __ATOMIC_ACQUIRE);
	for (unsigned b = 0; b < j->nbs; b++) {
		uint64_t n = __atomic_load_n(bcnt(j, k, b), __ATOMIC_ACQUIRE);
		for (unsigned c = 0; n && c < 3; c++)
			v[c] += n * j->bw[b][c];
	}
}

void gb_jit__count_take(struct gb_jit *j, unsigned k, struct gb_jit_counts *out)
{
	int64_t d[3] = { 0 };
	if (j->o.nostop && k < GB_JIT_TLS_COUNT) {
		uint64_t v[3];
		totals(j, k, v);
		for (unsigned c = 0; c < 3; c++) {
			d[c] = (int64_t)(v[c] - j->cbase[k][c]);
			j->cbase[k][c] = v[c];
		}
	}
	*out = (struct gb_jit_counts){ d[0], d[1], d[2] };
}

void ns_count_fold(struct gb_jit *j)
{
	if (!j->o.nostop)
		return;
	for (unsigned k = 0; k < GB_JIT_TLS_COUNT && j->nbs; k++)
		for (unsigned b = 0; b < j->nbs; b++) {
			uint64_t n = *bcnt(j, k, b);
			for (unsigned c = 0; n && c < 3; c++)
				*cnt(j, k, 0, c) += n * j->bw[b][c];
			*bcnt(j, k, b) = 0;
		}
	j->nbs = 0;
}

void gb_jit__count_add(struct gb_jit *j, unsigned k, const struct gb_jit_counts *c)
{
	if (!j->o.nostop || k >= GB_JIT_TLS_COUNT)
		return;
	*cnt(j, k, 0, 0) += (uint64_t)c->insns;
	*cnt(j, k, 0, 1) += (uint64_t)c->reads;
	*cnt(j, k, 0, 2) += (uint64_t)c->writes;
}

void ns_count_area_new(struct gb_jit *j, unsigned k)
{
	for (unsigned c = 0; c < 3; c++) {
		for (unsigned s = 0; s < NS_CSETS; s++)
			*cnt(j, k, s, c) = 0;
		j->cbase[k][c] = 0;
	}
	for (unsigned b = 0; b < NS_BSLOTS; b++)
		*bcnt(j, k, b) = 0;
}

void ns_twin_misses(struct gb_jit *j, struct gb_jit_misses *out, bool clear)
{
	uint64_t n = clear ? __atomic_exchange_n(dword(j, NS_TMISSES), 0, __ATOMIC_ACQ_REL)
			   : __atomic_load_n(dword(j, NS_TMISSES), __ATOMIC_ACQUIRE);
	const uint64_t *log = dword(j, NS_TMISSLOG);
	size_t have = n < NS_TMISSLOG_N ? (size_t)n : NS_TMISSLOG_N;
	out->count += n;
	for (size_t k = 0; k < have && out->n < GB_JIT_MISS_LOG; k++)
		out->pc[out->n++] = log[(n - have + k) % NS_TMISSLOG_N];
}

/* --- unwinding --- */

static uint64_t aslot(const uint8_t *area, size_t off)
{
	uint64_t v;
	memcpy(&v, area + off, 8);
	return v;
}

/* (any set: the harvest sums them; n < 0: what ran and no add counted) */
static void take_back(uint8_t *area, unsigned c, int64_t n)
{
	uint64_t v = aslot(area, T_CSET(0) + 8 * c) - (uint64_t)n;
	memcpy(area + T_CSET(0) + 8 * c, &v, 8);
}

static void flags_from(struct user_regs_struct *r, const uint8_t *area)
{
	uint64_t v = aslot(area, T_FLG), ah = (v >> 8) & 0xd5;
	r->eflags = (r->eflags & ~0x8d5ull) | ah | ((v & 0xff) ? 0x800 : 0);
}

/* rcx, rax, rdx saved at u->off + 9, 18, 27 (a lookup, a miss): the
 * area's values are the program's from then on. */
static void three(const struct unit *u, uint32_t off, struct user_regs_struct *r, const uint8_t *area)
{
	if (off >= u->off + TLS_OP)
		r->rcx = aslot(area, T_RCX);
	if (off >= u->off + 2 * TLS_OP)
		r->rax = aslot(area, T_RAX);
	if (off >= u->off + 3 * TLS_OP)
		r->rdx = aslot(area, T_RDX);
}

void ns_twin_unwind(struct gb_jit *j, const struct unit *u, uint32_t off,
		    struct user_regs_struct *r, uint8_t *area, uint64_t *pc, bool *keep_syscall)
{
	bool back = true; /* not run: its counts (and the rest of the block's) taken back */
	*pc = u->pc;
	(void)j;
	switch (u->tw) {
	case TW_HEAD: { /* the adds done so far: what the block has not run; else
			 * (a head inside the block) what it ran, not yet added */
		const uint32_t done[3] = { u->o_b, u->o_load, u->o_commit };
		for (unsigned c = 0; c < 3; c++)
			take_back(area, c, done[c] && off >= done[c] ? u->tb[c] : u->tpre[c]);
		if (!u->a && off >= u->o_flg && off < u->o_sahf1)
			r->rax = aslot(area, T_TWS);
		return;
	}
	case TW_LINK:
		return;
	case TW_RPRE: /* at the REP, rcx as it was: what the adds done counted taken back */
	case TW_RPOST: { /* after it: rcx times tb (the iterations not run) not yet taken off */
		const uint32_t done[3] = { u->o_b, u->o_load, u->o_commit };
		for (unsigned c = 0; c < 3; c++)
			if ((u->tw == TW_RPRE) == (done[c] && off >= done[c]))
				take_back(area, c, (int64_t)(r->rcx * (uint64_t)u->tb[c]));
		if (off >= u->o_flg && off < u->o_sahf1)
			r->rax = aslot(area, T_TWS);
		return;
	}
	case TW_REP: /* at it (or in it), rcx left: the iterations not run taken back */
		for (unsigned c = 0; c < 3; c++)
			take_back(area, c, (int64_t)(r->rcx * (uint64_t)u->tb[c]));
		return;
	case TW_RZERO: /* rcx 0: its one instruction counted from o_b on, then after it */
		if (off >= u->o_flg && off < u->o_sahf1)
			r->rax = aslot(area, T_TWS);
		if (off >= u->o_b)
			*pc = u->tgt;
		return;
	case TW_FIX: { /* the loop left (at pc): what is not taken off yet */
		const uint32_t done[3] = { u->o_b, u->o_load, u->o_commit };
		for (unsigned c = 0; c < 3; c++)
			if (done[c] && off < done[c])
				take_back(area, c, u->tb[c]);
		if (off >= u->o_flg && off < u->o_sahf1)
			r->rax = aslot(area, T_TWS);
		return;
	}
	case TW_CALL:
		if (off >= u->o_insn) { /* pushed: on at its target */
			*pc = u->tgt;
			return;
		}
		if (off >= u->o_b && off < u->o_load)
			r->rax = aslot(area, T_RAX);
		break;
	case TW_LOOKUP:
		if (off == u->o_hit || off == u->o_rel) { /* done: on at the target */
			*pc = aslot(area, T_TGT);
			return;
		}
		three(u, off, r, area);
		if (off >= u->o_flg && off < u->o_sahf2)
			flags_from(r, area);
		break;
	case TW_SYSCALL:
		if (off >= u->o_insn) { /* made: after it, rcx as the kernel leaves it */
			*pc = u->tgt;
			r->rcx = u->tgt;
			*keep_syscall = off == u->o_insn;
			return;
		}
		break;
	case TW_MISS: /* the jump taken: on at its target */
		three(u, off, r, area);
		if (off >= u->o_flg && off < u->o_sahf2)
			flags_from(r, area);
		return;
	default: /* TW_INSN */
		break;
	}
	for (unsigned c = 0; back && c < 3; c++)
		take_back(area, c, u->tb[c]);
}
