/* Unwinding a thread of the stop-free mode (gb_jit__unwind, jit.h): a rip
 * anywhere in the code region back to an original instruction boundary.
 *
 * Every piece of code is either before its point of no return (the
 * instruction it stands for has not taken effect: the thread goes back to
 * that instruction, its record taken off the ring) or after it (the
 * instruction is done: the thread goes on at its original target).  The
 * registers a piece has moved away are in the global save slots (a
 * translated instruction, a block head, an exit stub: the lock held) or in
 * the thread's area (everything of this mode); the offsets recorded at
 * emission (struct unit, struct nscall, struct ns_offs) say which.
 * docs/trace.md "A trap without stops". */
#include <errno.h>
#include <string.h>
#include <sys/user.h>

#include "common/bound.h"
#include "jit/internal.h"

#define TLS_OP 9    /* mov gs:[disp32], r / mov r, gs:[disp32] */

struct uw {
	struct gb_jit *j;
	struct user_regs_struct *r;
	const uint8_t *area;     /* gebpf's view of the thread's area */
	uint64_t pc;
	bool held, recorded, keep_syscall;
	bool abandon;            /* it waits with ticket .ticket: given up */
	bool post;               /* it is in a release past serving the next */
	bool wake;               /* ... whose taker's sleep mark it took: it owes the wake */
	uint32_t ticket;
	uint32_t drop;           /* ring words to take off (held only) */
};

static uint64_t *reg(struct user_regs_struct *r, unsigned g)
{
	switch (g) {
	case GB_REG_RAX: return (uint64_t *)&r->rax;
	case GB_REG_RBX: return (uint64_t *)&r->rbx;
	case GB_REG_RCX: return (uint64_t *)&r->rcx;
	case GB_REG_RDX: return (uint64_t *)&r->rdx;
	case GB_REG_RSI: return (uint64_t *)&r->rsi;
	case GB_REG_RDI: return (uint64_t *)&r->rdi;
	case GB_REG_RBP: return (uint64_t *)&r->rbp;
	case GB_REG_RSP: return (uint64_t *)&r->rsp;
	case GB_REG_R8:  return (uint64_t *)&r->r8;
	case GB_REG_R9:  return (uint64_t *)&r->r9;
	case GB_REG_R10: return (uint64_t *)&r->r10;
	case GB_REG_R11: return (uint64_t *)&r->r11;
	case GB_REG_R12: return (uint64_t *)&r->r12;
	case GB_REG_R13: return (uint64_t *)&r->r13;
	case GB_REG_R14: return (uint64_t *)&r->r14;
	default:         return (uint64_t *)&r->r15;
	}
}

static uint64_t aslot(const struct uw *w, size_t off)
{
	uint64_t v;
	memcpy(&v, w->area + off, 8);
	return v;
}

static void from_area(struct uw *w, unsigned g, size_t off) { *reg(w->r, g) = aslot(w, off); }

/* The flags lahf/seto saved in slot: ah = SF ZF AF PF CF, al = OF. */
static void flags_from(struct uw *w, size_t slot)
{
	uint64_t v = aslot(w, slot), ah = (v >> 8) & 0xd5;
	w->r->eflags = (w->r->eflags & ~0x8d5ull) | ah | ((v & 0xff) ? 0x800 : 0);
}

static void flags_from_area(struct uw *w) { flags_from(w, T_FLG); }

/* rdx rsi rdi r10 r11 saved in this order from fsave, reloaded in reverse
 * from frest (a futex call, the ring's slow path). */
static void five(struct uw *w, uint32_t off, uint32_t fsave, uint32_t frest)
{
	static const uint8_t regs[] = { GB_REG_RDX, GB_REG_RSI, GB_REG_RDI, GB_REG_R10, GB_REG_R11 };
	static const size_t slots[] = { T_RDX, T_RSI, T_RDI, T_R10, T_R11 };
	for (unsigned i = 0; i < 5; i++)
		if (off >= fsave + TLS_OP * (i + 1) && off <= frest + TLS_OP * (4 - i))
			from_area(w, regs[i], slots[i]);
}

static const struct unit *unit_at(const struct gb_jit *j, uint64_t off)
{
	size_t lo = GB_UPPER(j->u, j->nu, off, off);
	return lo && off < j->u[lo - 1].end ? &j->u[lo - 1] : NULL;
}

/* The call site holding off (off in [site.off, site.o_end)), or NULL. */
static const struct nscall *site_at(const struct gb_jit *j, uint64_t off)
{
	size_t lo = 0, hi = j->ncs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (j->cs[mid].off <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && off < j->cs[lo - 1].o_end ? &j->cs[lo - 1] : NULL;
}

/* rax and rcx at off of a call site (in_routine: inside the routine). */
static void site_regs(struct uw *w, const struct nscall *c, uint64_t off, bool in_routine)
{
	if (in_routine || (off >= c->o_saved && off <= c->o_ret) || off > c->o_ret)
		from_area(w, GB_REG_RAX, T_RAX);
	if (in_routine || (off >= c->o_saved && off <= c->o_ret))
		from_area(w, GB_REG_RCX, T_RCX);
	/* rcx reloaded at o_ret, rax at o_ret + TLS_OP: live from there on;
	 * the area's values are the live ones anyway */
}

/* The record of the instruction a transfer or system call unit stands for
 * (the U_INSN just before it). */
static uint32_t insn_words(const struct gb_jit *j, const struct unit *u)
{
	return u > j->u && u[-1].kind == U_INSN ? u[-1].words : 0;
}

/* off is the jump right after a release's call site (lock.c's ns_leave):
 * the lock released, the thread on at the target.  (The release from
 * outside a thread stopped there would serve a ticket it does not hold.) */
static bool after_release(const struct gb_jit *j, uint32_t off)
{
	const struct nscall *c = off ? site_at(j, off - 1) : NULL;
	return c && !c->acq && c->o_end == off;
}

/* A thread past a call site (or in its routine) of unit u: where it goes. */
static void at_site(struct uw *w, const struct unit *u, const struct nscall *c, uint64_t off, bool routine,
		    bool held)
{
	const struct gb_jit *j = w->j;
	site_regs(w, c, off, routine);
	w->held = held;
	switch (u->ns) {
	case GB_JIT_NS_ENTRY: /* the stretch not begun: back to its entry */
		w->pc = u->pc;
		break;
	case GB_JIT_NS_SYSCALL:
		if (c->acq) {
			w->pc = u->pc + 2;          /* the system call made */
		} else {
			w->pc = u->pc;
			if (held)
				w->drop += insn_words(j, u);
			else
				w->recorded = true;
		}
		break;
	case GB_JIT_NS_LOOKUP:
		w->pc = aslot(w, T_TGT);
		w->r->rsp += u->tgt; /* a ret's pop (u->tgt), not done yet */
		break;
	default: /* an exit, a stub: on at the target */
		w->pc = u->tgt ? u->tgt : u->pc;
		break;
	}
}

/* The acquire or release routine (the thread's way back: T_RET). */
static int in_lock(struct uw *w, uint32_t off)
{
	const struct gb_jit *j = w->j;
	const struct ns_offs *o = &j->ro;
	uint64_t back = aslot(w, T_RET) - j->m.code_addr;
	const struct nscall *c = site_at(j, back);
	const struct unit *u = c ? unit_at(j, c->off) : NULL;
	if (!u || c->o_ret != back)
		return -EINVAL;
	bool held;
	if (off < o->rel) { /* acquire (ticket.c) */
		bool ticket = off >= o->x1;
		uint32_t t = off < o->tk ? (uint32_t)w->r->rax : (uint32_t)aslot(w, T_TICKET);
		held = ticket && __atomic_load_n((uint32_t *)(j->m.data + NS_TSERV), __ATOMIC_ACQUIRE) == t;
		if (ticket && !held) {
			w->abandon = true;
			w->ticket = t;
		}
		if (off >= o->marked && off <= o->acq_sahf)
			w->drop += 1; /* the marker of a stretch not begun */
		five(w, off, o->fsave[0], o->frest[0]);
		if (off >= o->acq_fl && off != o->acq_sahf)
			flags_from(w, T_LFLG);
	} else {
		/* past serving ticket s, it passes s on when s was given up */
		bool pass = (off >= o->rel_xs && off < o->rel_9 && (uint32_t)w->r->rax == 2) ||
			    (off >= o->rel_9 && off <= o->rel_sahf && w->r->rcx) ||
			    (off >= o->rel_next && off < o->rel_ret2);
		held = off < o->xr || pass;
		w->post = !held;
		/* It took the sleeper's 1 from s's word (rax 1 at rel_xs) and
		 * has not made the FUTEX_WAKE yet (before its syscall, or at
		 * its entry stop: rax -ENOSYS): nobody else will wake it. */
		w->wake = (off >= o->rel_xs && off < o->fsave[1] && (uint32_t)w->r->rax == 1) ||
			  (off >= o->fsave[1] && off < o->frest[1]) ||
			  (off == o->frest[1] && (int64_t)w->r->rax == -ENOSYS);
		if (w->wake)
			w->ticket = (uint32_t)aslot(w, T_TICKET);
		five(w, off, o->fsave[1], o->frest[1]);
		if (off >= o->rel_fl && off < o->rel_sahf)
			flags_from(w, T_LFLG);
	}
	at_site(w, u, c, off, true, held);
	return 0;
}

static void lookup(struct uw *w, const struct unit *u, uint32_t off)
{
	const struct gb_jit *j = w->j;
	const struct nscall *c = site_at(j, off);
	if (off == u->o_hit) { /* done: the translated target next */
		w->held = true;
		w->pc = aslot(w, T_TGT);
		return;
	}
	if (c && off >= u->o_rel) { /* its release: the lock held until it returns */
		at_site(w, u, c, off, false, off < c->o_ret);
		return;
	}
	if (off > u->o_rel) { /* after the release: a ret's lea rsp, the jmp */
		const struct nscall *s = site_at(j, u->o_rel);
		w->pc = aslot(w, T_TGT);
		if (s && off == s->o_end)
			w->r->rsp += u->tgt; /* a ret's lea rsp not run yet */
		return;
	}
	/* not taken effect: back to the instruction, its record dropped */
	w->held = true;
	w->pc = u->pc;
	w->drop += insn_words(j, u);
	if (off >= u->off + TLS_OP)
		from_area(w, GB_REG_RCX, T_RCX);
	if (off >= u->off + 2 * TLS_OP)
		from_area(w, GB_REG_RAX, T_RAX);
	if (off >= u->off + 3 * TLS_OP)
		from_area(w, GB_REG_RDX, T_RDX);
	if ((off >= u->o_flg && off < u->o_sahf1) || (off >= u->o_out && off < u->o_sahf2))
		flags_from_area(w);
	if ((off >= u->o_sahf1 + TLS_OP && off <= u->o_insn) || off == u->o_retry)
		from_area(w, GB_REG_R11, T_R11);
}

/* The ring's slow path (shared) or a block's budget exit to it. */
static int ring(struct uw *w, const struct unit *u, uint32_t off)
{
	const struct gb_jit *j = w->j;
	const struct ns_offs *o = &j->ro;
	w->held = true;
	if (u->off != o->slow) { /* the budget exit: back to its block */
		w->pc = u->pc;
		if (off >= u->off + TLS_OP)
			from_area(w, GB_REG_RAX, T_RAX);
		if (off >= u->off + 2 * TLS_OP)
			from_area(w, GB_REG_RCX, T_RCX);
		return 0;
	}
	const struct unit *h = unit_at(j, aslot(w, T_RET) - j->m.code_addr);
	if (!h || h->kind != U_HEAD)
		return -EINVAL;
	w->pc = h->pc;
	if (off >= o->slow_way && off < o->slow_end) { /* (gone: each reloaded from its slot) */
		static const uint8_t g[] = { GB_REG_RAX, GB_REG_RCX, GB_REG_RDX, GB_REG_RSI, GB_REG_RDI,
					     GB_REG_R10, GB_REG_R11 };
		static const size_t sl[] = { T_RAX, T_RCX, T_RDX, T_RSI, T_RDI, T_R10, T_R11 };
		for (unsigned k = 0; k < 7; k++)
			from_area(w, g[k], sl[k]);
		flags_from_area(w);
		return 0;
	}
	if (off <= o->slow_sahf)
		from_area(w, GB_REG_RCX, T_RCX);
	if (off <= o->slow_sahf + TLS_OP)
		from_area(w, GB_REG_RAX, T_RAX);
	five(w, off, o->slow_flg, o->slow_rest);
	if (off >= o->slow_flg && off < o->slow_sahf)
		flags_from_area(w);
	return 0;
}

/* A system call of the range made without the lock. */
static void syscall_unit(struct uw *w, const struct unit *u, uint32_t off)
{
	const struct nscall *c = site_at(w->j, off);
	if (c) {
		/* the acquire returned (its marker written) / the release not run */
		bool held = c->acq ? off >= c->o_ret : off < c->o_ret;
		if (c->acq && held)
			w->drop += 1;
		at_site(w, u, c, off, false, held);
		return;
	}
	if (off < u->o_insn) { /* released, the call not made: recorded already */
		w->pc = u->pc;
		w->recorded = true;
		return;
	}
	/* made: after it, rcx the original return address */
	w->pc = u->pc + 2;
	w->r->rcx = u->pc + 2;
	w->keep_syscall = off == u->o_insn;
}

static int ns_unit(struct uw *w, const struct unit *u, uint32_t off)
{
	const struct gb_jit *j = w->j;
	const struct nscall *c;
	switch (u->ns) {
	case GB_JIT_NS_LOCK:
		return in_lock(w, off);
	case GB_JIT_NS_RING:
		return ring(w, u, off);
	case GB_JIT_NS_LOOKUP:
		lookup(w, u, off);
		return 0;
	case GB_JIT_NS_SYSCALL:
		syscall_unit(w, u, off);
		return 0;
	case GB_JIT_NS_NATIVE: /* an original instruction's copy, run natively
				* (reloc.h): at pc, a call's push undone */
		w->pc = u->pc;
		w->r->rsp += u->tgt;
		return 0;
	case GB_JIT_NS_ENTRY: {
		int o = ns_owner_unwind(j, u, off - (uint32_t)u->off, (uint64_t *)&w->r->rax,
					(uint64_t *)&w->r->rcx, (uint64_t *)&w->r->rsp);
		w->pc = u->pc;
		if (o <= 0)
			return o; /* in the check: the stretch not begun */
		c = site_at(j, off);
		if (c && off < c->o_ret) {
			site_regs(w, c, off, false);
		} else { /* taken, its marker written: the stretch not begun */
			if (c)
				site_regs(w, c, off, false);
			w->held = true;
			w->drop += 1;
		}
		return 0;
	}
	case GB_JIT_NS_EXIT:
		c = site_at(j, off);
		if (c) {
			at_site(w, u, c, off, false, off < c->o_ret);
			return 0;
		}
		if (after_release(j, off)) {
			w->pc = u->tgt ? u->tgt : u->pc;
			return 0;
		}
		w->held = true;
		if (u->tgt && off < u->o_insn) { /* a call not done: back to it */
			w->pc = u->pc;
			w->drop += insn_words(j, u);
			if (off >= u->off + TLS_OP && off <= u->o_insn - 5 - TLS_OP)
				from_area(w, GB_REG_RAX, T_RAX);
			return 0;
		}
		w->pc = u->tgt ? u->tgt : u->pc;
		return 0;
	}
	return -EINVAL;
}

/* An exit stub (to a target of the range not translated): getpid, then
 * the release and a jump to it. */
static void stub(struct uw *w, const struct unit *u, uint32_t off, const struct gb_jit_loc *loc)
{
	const struct nscall *c = site_at(w->j, off);
	if (c) {
		at_site(w, u, c, off, false, off < c->o_ret);
		return;
	}
	w->pc = u->pc;
	if (after_release(w->j, off))
		return;
	w->held = true;
	for (unsigned g = 0; g < GB_REG_COUNT; g++)
		if (loc->restore & (1u << g))
			*reg(w->r, g) = gb_jit__saved(w->j, g);
}

/* A REP loop's tail (rep.c): the iteration done; rcx counted down at
 * u->off (unless stopped there); on at the instruction while the hardware
 * would go on iterating, else at the next one. */
static void rep_tail(struct uw *w, const struct unit *u, uint32_t off)
{
	uint64_t *rcx = reg(w->r, GB_REG_RCX);
	bool zf = w->r->eflags & 0x40;
	w->held = true;
	if (off == u->off)
		*rcx -= 1;
	bool more = *rcx && (u->a == REP_ALWAYS || (u->a == REP_WHILE_ZF) == zf);
	w->pc = more ? u->pc : u->tgt;
}

static void drop_words(struct gb_jit *j, uint32_t words, struct gb_jit_cursor *c, struct gb_jit_unwound *out)
{
	size_t used = gb_jit__ring_used(j), to = used > words ? used - words : 0;
	out->dropped = (uint32_t)(used - to);
	if (__atomic_load_n(dword(j, NS_DROPPING), __ATOMIC_ACQUIRE))
		return; /* the scratch area: nothing the consumer sees */
	if (c && c->base == *dword(j, NS_BASE)) {
		if (c->pos > to) { /* handed out already: count the instructions */
			size_t p = to;
			struct gb_jit_rec rec;
			while (p < c->pos && gb_jit__ring_next(j, &p, 0, 0, &rec) == 1)
				out->late_recs += rec.kind == GB_JIT_REC_INSN;
			c->pos = to;
			if (c->mark > to)
				c->mark = SIZE_MAX; /* (what came before it: not known) */
		}
		if (c->limit > to)
			c->limit = to;
	}
	__atomic_store_n(dword(j, HEAD), daddr(j, RING) + 8 * to, __ATOMIC_RELEASE);
}

int gb_jit__unwind(struct gb_jit *j, struct user_regs_struct *regs, struct gb_jit_cursor *c,
		   struct gb_jit_unwound *out)
{
	memset(out, 0, sizeof(*out));
	if (!j->o.nostop)
		return -EINVAL;
	struct gb_jit_loc loc;
	if (gb_jit__locate(j, regs->rip, &loc))
		return -ENOENT;
	uint64_t lo = daddr(j, NS_TLS), a = regs->gs_base - lo;
	if (regs->gs_base < lo || a % GB_JIT_TLS_SIZE || a / GB_JIT_TLS_SIZE >= GB_JIT_TLS_COUNT)
		return -EINVAL;
	struct user_regs_struct r = *regs;
	struct uw w = { .j = j, .r = &r, .area = j->m.data + NS_TLS + a };
	uint32_t off = (uint32_t)(regs->rip - j->m.code_addr);
	const struct unit *u = unit_at(j, off);
	if (!u)
		return -ENOENT;
	int err = 0;
	switch (u->kind) {
	case U_NS:
		err = ns_unit(&w, u, off);
		break;
	case U_STUB:
		stub(&w, u, off, &loc);
		break;
	case U_REP:
		rep_tail(&w, u, off);
		break;
	case U_TWIN: /* a counting twin (twin_unwind.c): no lock, no record */
		ns_twin_unwind(j, u, off, &r, j->m.data + NS_TLS + a, &w.pc, &w.keep_syscall);
		break;
	default: /* an instruction, a block head, a link: the lock held */
		w.held = true;
		w.pc = loc.pc;
		w.drop = loc.unwrite;
		for (unsigned g = 0; g < GB_REG_COUNT; g++)
			if (loc.restore & (1u << g))
				*reg(&r, g) = gb_jit__saved(j, g);
		break;
	}
	if (err)
		return err;
	/* A head not run yet (the thread at it, at its budget's exit, or in
	 * the ring's slow path, before or after it counted the room: the
	 * budget at 0, or the blocks that still fit already given): the
	 * thread comes back through an entry block, whose acquire writes a
	 * marker before that head again, in the one marker's room each head's
	 * budget counts (a count made in the slow path counted that head's
	 * marker as written, before it).  A stretch with records after its
	 * marker (the head a link's) had none there; one with nothing after
	 * it gives its marker back, or a writer unwound again and again at a
	 * pass's end (Go's SIGURG every 10 ms to a goroutine that runs on)
	 * left one more each time, past the ring's end into the lock's ticket
	 * words, and one unwound at the FUTEX_WAKE after a count (pt_preempt's
	 * 100 us SIGALRM) one more per count near the end. */
	bool at_head = u->kind == U_HEAD || (u->kind == U_NS && u->ns == GB_JIT_NS_RING);
	if (w.held && !w.drop && at_head &&
	    !__atomic_load_n(dword(j, NS_DROPPING), __ATOMIC_ACQUIRE) &&
	    ns_ring_ends_with_mark(j, c, gb_jit__ring_used(j), (unsigned)(a / GB_JIT_TLS_SIZE)))
		w.drop = 1;
	if (w.drop && w.held)
		drop_words(j, w.drop, c, out);
	r.rip = w.pc;
	if (!w.keep_syscall)
		r.orig_rax = (unsigned long long)-1;
	*regs = r;
	out->pc = w.pc;
	out->ns = u->kind == U_NS ? u->ns : GB_JIT_NS_NONE;
	out->held = w.held;
	out->recorded = w.recorded;
	/* A budget at 0 is a head's that ran out, on its way to the ring's slow
	 * path (the head's store done, the slow path's not yet): the thread
	 * runs that head again, which must find it spent (at 0 its decrement
	 * would wrap and no head would leave for the slow path again).  The
	 * lock is the thread's: no other writer. */
	if (w.held && !*dword(j, BUDGET))
		*dword(j, BUDGET) = 1;
	if (w.held || (w.abandon && gb_jit__lock_abandon(j, w.ticket)))
		gb_jit__lock_release(j);
	if (w.wake)
		gb_jit__lock_wake(j, w.ticket);
	if (w.post)
		gb_jit__lock_post(j);
	return 0;
}
