/* The stop-free mode's lock (docs/trace.md "A trap without stops: the
 * translator's stop-free mode"): a ticket lock, so threads get the range in
 * the order they asked for it.  Two words of the data part: NS_TNEXT, the
 * next ticket, and NS_TSERV, the ticket served (free when they are equal),
 * and a word per ticket, SLOT[t] (t's low 16 bits): 1 when t's taker sleeps
 * on it, 2 when t was given up.
 *
 *   acquire:  t = xadd(NEXT, 1);
 *             while (SERV != t) { xchg(SLOT[t], 1); if (SERV == t) { SLOT[t] = 0; break; }
 *                                 if (GONE && BAIL) { xchg(SLOT[t], 2); goto *BAIL; }
 *                                 futex(SLOT[t], FUTEX_WAIT, 1, 10 ms); }
 *   release:  s = SERV + 1; xchg(SERV, s);
 *             if (SLOT[s]) switch (xchg(SLOT[s], 0)) {
 *             case 2: goto release;                     (s given up: serve the next)
 *             case 1: futex(SLOT[s], FUTEX_WAKE, 1); }
 *
 * A thread waits on its own ticket's word, so a release wakes only the
 * next one, and only when it sleeps.  Its sleep is bounded
 * (GB_JIT_LOCK_SLEEP_MS): when gebpf is gone (live.c: the worker that may
 * hold a ticket, or have taken one, is dead) it gives its ticket up and
 * goes on without the lock where its site can (T_BAIL).  A ticket whose taker is gone before
 * its turn (gebpf unwound it out of the acquire to take a signal, or gave
 * up its own wait: gb_jit__lock_try_for) is marked 2; whoever serves it (a
 * release, or the abandoner finding it served already: the xchg of the
 * word decides) serves the next instead.  The release's common path (the
 * next ticket's word 0) leaves the flags alone; the acquire and the
 * release's other paths save them with lahf/seto (T_LFLG).  Both are
 * position-independent code copied to the start of the code region, the
 * data part's addresses put at their `movabs $MAGIC`s.  A site calls one as
 * lock.c's ns_call does: rax and rcx in its area, its way back in T_RET. */
#include <errno.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "jit/internal.h"

#define XS(x) S_(x)
#define S_(x) #x
#define MAGIC_D 0x1122334455667701   /* the data part */
#define MAGIC_S 0x1122334455667702   /* its tickets' words (NS_TSLOT) */
_Static_assert(HEAD == 128 && NS_TNEXT == 256 && NS_TSERV == 260 && NS_TSLOTS == 65536,
	       "the lock routines' offsets");

#define FIVE_SAVE                                                                                   \
	"	mov %rdx, %gs:" XS(T_RDX) "\n	mov %rsi, %gs:" XS(T_RSI) "\n"                       \
	"	mov %rdi, %gs:" XS(T_RDI) "\n	mov %r10, %gs:" XS(T_R10) "\n"                       \
	"	mov %r11, %gs:" XS(T_R11) "\n"
#define FIVE_REST                                                                                   \
	"	mov %gs:" XS(T_R11) ", %r11\n	mov %gs:" XS(T_R10) ", %r10\n"                       \
	"	mov %gs:" XS(T_RDI) ", %rdi\n	mov %gs:" XS(T_RSI) ", %rsi\n"                       \
	"	mov %gs:" XS(T_RDX) ", %rdx\n"

__asm__(
	".text\n"
	".globl gb_jit_lk_acq, gb_jit_lk_acq_fl, gb_jit_lk_acq_x1, gb_jit_lk_acq_tk, gb_jit_lk_acq_got\n"
	".globl gb_jit_lk_acq_marked, gb_jit_lk_acq_sahf, gb_jit_lk_acq_fsave, gb_jit_lk_acq_frest\n"
	".globl gb_jit_lk_acq_end, gb_jit_lk_acq_bail\n"
	"gb_jit_lk_acq:\n"
	"	lahf\n"
	"	seto %al\n"
	"	mov %rax, %gs:" XS(T_LFLG) "\n"
	"gb_jit_lk_acq_fl:\n"
	"	movabs $" XS(MAGIC_D) ", %rcx\n"
	"	mov $1, %eax\n"
	"	lock xadd %eax, 256(%rcx)\n"
	"gb_jit_lk_acq_x1:\n"
	"	mov %eax, %gs:" XS(T_TICKET) "\n"
	"gb_jit_lk_acq_tk:\n"
	"	cmp 260(%rcx), %eax\n"
	"	jne 5f\n"
	"gb_jit_lk_acq_got:\n"
	"6:\n"
	/* served: the stretch's marker (the area's word) at the ring's head */
	"	mov 128(%rcx), %rax\n"
	"	mov %gs:" XS(T_MARK) ", %rcx\n"
	"	mov %rcx, (%rax)\n"
	"	lea 8(%rax), %rax\n"
	"	movabs $" XS(MAGIC_D) ", %rcx\n"
	"	mov %rax, 128(%rcx)\n"
	"gb_jit_lk_acq_marked:\n"
	"	mov %gs:" XS(T_LFLG) ", %rax\n"
	"	add $0x7f, %al\n"
	"	sahf\n"
	"gb_jit_lk_acq_sahf:\n"
	"	jmp *%gs:" XS(T_RET) "\n"
	/* not served: say so on the ticket's wait word, look again, sleep */
	"5:	movzwl %ax, %eax\n"
	"	movabs $" XS(MAGIC_S) ", %rcx\n"
	"	lea (%rcx,%rax,4), %rcx\n"
	"	mov %rcx, %gs:" XS(T_WADDR) "\n"
	"	mov $1, %eax\n"
	"	xchg %eax, (%rcx)\n"
	"	mov %gs:" XS(T_TICKET) ", %eax\n"
	"	movabs $" XS(MAGIC_D) ", %rcx\n"
	"	cmp 260(%rcx), %eax\n"
	"	je 7f\n"
	/* gebpf gone (live.c): nobody may ever serve the tickets ahead */
	"	cmpb $0, " XS(NS_GONE) "(%rcx)\n"
	"	jne 8f\n"
	"gb_jit_lk_acq_fsave:\n"
	FIVE_SAVE
	"	mov %gs:" XS(T_WADDR) ", %rdi\n"
	"	xor %esi, %esi\n"           /* FUTEX_WAIT (shared: gebpf's mapping wakes too) */
	"	mov $1, %edx\n"
	"	lea " XS(NS_LKTO) "(%rcx), %r10\n"   /* a bound: NS_GONE looked at again */
	"	mov $202, %eax\n"
	"	syscall\n"
	"gb_jit_lk_acq_frest:\n"
	FIVE_REST
	"	mov %gs:" XS(T_TICKET) ", %eax\n"
	"	movabs $" XS(MAGIC_D) ", %rcx\n"
	"	cmp 260(%rcx), %eax\n"
	"	jne 5b\n"
	"7:	mov %gs:" XS(T_WADDR) ", %rax\n"
	"	movl $0, (%rax)\n"
	"	jmp 6b\n"
	/* gone: the ticket given up, the flags, rax and rcx back, and on
	 * where the site says (T_BAIL: its entry block again, whose check now
	 * sends it to the native copy, or the original code after a system
	 * call); a site with no way on (0) sleeps on, within the bound */
	"8:	cmpq $0, %gs:" XS(T_BAIL) "\n"
	"	je gb_jit_lk_acq_fsave\n"
	"gb_jit_lk_acq_bail:\n"
	"	mov %gs:" XS(T_WADDR) ", %rcx\n"
	"	mov $2, %eax\n"
	"	xchg %eax, (%rcx)\n"
	"	mov %gs:" XS(T_LFLG) ", %rax\n"
	"	add $0x7f, %al\n"
	"	sahf\n"
	"	mov %gs:" XS(T_RCX) ", %rcx\n"
	"	mov %gs:" XS(T_RAX) ", %rax\n"
	"	jmp *%gs:" XS(T_BAIL) "\n"
	"gb_jit_lk_acq_end:\n");

__asm__(
	".text\n"
	".globl gb_jit_lk_rel, gb_jit_lk_rel_xr, gb_jit_lk_rel_fl, gb_jit_lk_rel_xs, gb_jit_lk_rel_9\n"
	".globl gb_jit_lk_rel_sahf, gb_jit_lk_rel_next, gb_jit_lk_rel_ret2\n"
	".globl gb_jit_lk_rel_fsave, gb_jit_lk_rel_frest, gb_jit_lk_rel_end\n"
	"gb_jit_lk_rel:\n"
	"	movabs $" XS(MAGIC_D) ", %rcx\n"
	"1:	mov 260(%rcx), %eax\n"
	"	lea 1(%rax), %eax\n"
	"	xchg %eax, 260(%rcx)\n"
	"gb_jit_lk_rel_xr:\n"
	/* ticket s served now: its word (flag-free) */
	"	lea 1(%rax), %eax\n"
	"	movzwl %ax, %eax\n"
	"	movabs $" XS(MAGIC_S) ", %rcx\n"
	"	mov (%rcx,%rax,4), %ecx\n"
	"	jrcxz 8f\n"
	"	jmp 3f\n"
	"8:	jmp *%gs:" XS(T_RET) "\n"
	/* given up, or its taker asleep: the flags saved */
	"3:	mov %eax, %gs:" XS(T_TICKET) "\n"
	"	lahf\n"
	"	seto %al\n"
	"	mov %rax, %gs:" XS(T_LFLG) "\n"
	"gb_jit_lk_rel_fl:\n"
	"	mov %gs:" XS(T_TICKET) ", %eax\n"
	"	movabs $" XS(MAGIC_S) ", %rcx\n"
	"	lea (%rcx,%rax,4), %rcx\n"
	"	mov %rcx, %gs:" XS(T_WADDR) "\n"
	"	xor %eax, %eax\n"
	"	xchg %eax, (%rcx)\n"
	"gb_jit_lk_rel_xs:\n"          /* eax 2: s is the thread's to pass on */
	"	xor %ecx, %ecx\n"
	"	cmp $1, %eax\n"
	"	je 4f\n"
	"	cmp $2, %eax\n"
	"	jne 9f\n"                  /* 0: its abandoner passes it on */
	"	mov $1, %ecx\n"
	"	jmp 9f\n"
	"4:\n"
	"gb_jit_lk_rel_fsave:\n"
	FIVE_SAVE
	"	mov %gs:" XS(T_WADDR) ", %rdi\n"
	"	mov $1, %esi\n"             /* FUTEX_WAKE */
	"	mov $1, %edx\n"
	"	xor %r10d, %r10d\n"
	"	mov $202, %eax\n"
	"	syscall\n"
	"gb_jit_lk_rel_frest:\n"
	FIVE_REST
	"	xor %ecx, %ecx\n"
	"9:\n"
	"gb_jit_lk_rel_9:\n"           /* rcx 1: s is the thread's to pass on */
	"	mov %gs:" XS(T_LFLG) ", %rax\n"
	"	add $0x7f, %al\n"
	"	sahf\n"
	"gb_jit_lk_rel_sahf:\n"
	"	jrcxz 6f\n"
	"gb_jit_lk_rel_next:\n"
	"	movabs $" XS(MAGIC_D) ", %rcx\n"
	"	jmp 1b\n"
	"6:\n"
	"gb_jit_lk_rel_ret2:\n"
	"	jmp *%gs:" XS(T_RET) "\n"
	"gb_jit_lk_rel_end:\n");

extern const uint8_t gb_jit_lk_acq[], gb_jit_lk_acq_fl[], gb_jit_lk_acq_x1[], gb_jit_lk_acq_tk[],
	gb_jit_lk_acq_got[], gb_jit_lk_acq_marked[], gb_jit_lk_acq_sahf[], gb_jit_lk_acq_fsave[],
	gb_jit_lk_acq_frest[], gb_jit_lk_acq_end[], gb_jit_lk_acq_bail[];
extern const uint8_t gb_jit_lk_rel[], gb_jit_lk_rel_xr[], gb_jit_lk_rel_fl[], gb_jit_lk_rel_xs[],
	gb_jit_lk_rel_9[], gb_jit_lk_rel_sahf[], gb_jit_lk_rel_next[], gb_jit_lk_rel_ret2[],
	gb_jit_lk_rel_fsave[], gb_jit_lk_rel_frest[], gb_jit_lk_rel_end[];

/* Copy routine [lo, hi) here, its magics replaced: its offset, or -1. */
static long copy_routine(struct gb_jit *j, const uint8_t *lo, const uint8_t *hi, unsigned want)
{
	struct gb_emit *m = &j->em;
	size_t at = m->used, n = (size_t)(hi - lo);
	const uint64_t magic[2] = { MAGIC_D, MAGIC_S };
	const uint64_t addr[2] = { daddr(j, 0), daddr(j, NS_TSLOT) };
	gb_emit_raw(m, lo, n);
	if (m->err)
		return -1;
	unsigned found = 0;
	for (size_t k = at; k + 8 <= at + n; k++)
		for (unsigned i = 0; i < 2; i++)
			if (!memcmp(m->buf + k, &magic[i], 8)) {
				memcpy(m->buf + k, &addr[i], 8);
				found++;
			}
	if (found != want) {
		m->err = -EINVAL;
		return -1;
	}
	return (long)at;
}

#define AT(base, sym, lo) ((uint32_t)((base) + (size_t)((sym) - (lo))))

void ns_lock_routines(struct gb_jit *j)
{
	struct ns_offs *o = &j->ro;
	j->acq = gb_emit_here(&j->em);
	long a = copy_routine(j, gb_jit_lk_acq, gb_jit_lk_acq_end, 5);
	if (a < 0)
		return;
	o->acq = (uint32_t)a;
	o->acq_fl = AT(a, gb_jit_lk_acq_fl, gb_jit_lk_acq);
	o->x1 = AT(a, gb_jit_lk_acq_x1, gb_jit_lk_acq);
	o->tk = AT(a, gb_jit_lk_acq_tk, gb_jit_lk_acq);
	o->got = AT(a, gb_jit_lk_acq_got, gb_jit_lk_acq);
	o->marked = AT(a, gb_jit_lk_acq_marked, gb_jit_lk_acq);
	o->acq_sahf = AT(a, gb_jit_lk_acq_sahf, gb_jit_lk_acq);
	o->fsave[0] = AT(a, gb_jit_lk_acq_fsave, gb_jit_lk_acq);
	o->frest[0] = AT(a, gb_jit_lk_acq_frest, gb_jit_lk_acq);
	o->acq_end = AT(a, gb_jit_lk_acq_end, gb_jit_lk_acq);
	o->acq_bail = AT(a, gb_jit_lk_acq_bail, gb_jit_lk_acq);
	j->rel = gb_emit_here(&j->em);
	long r = copy_routine(j, gb_jit_lk_rel, gb_jit_lk_rel_end, 4);
	if (r < 0)
		return;
	o->rel = (uint32_t)r;
	o->rel_fl = AT(r, gb_jit_lk_rel_fl, gb_jit_lk_rel);
	o->xr = AT(r, gb_jit_lk_rel_xr, gb_jit_lk_rel);
	o->rel_xs = AT(r, gb_jit_lk_rel_xs, gb_jit_lk_rel);
	o->rel_9 = AT(r, gb_jit_lk_rel_9, gb_jit_lk_rel);
	o->rel_sahf = AT(r, gb_jit_lk_rel_sahf, gb_jit_lk_rel);
	o->rel_next = AT(r, gb_jit_lk_rel_next, gb_jit_lk_rel);
	o->rel_ret2 = AT(r, gb_jit_lk_rel_ret2, gb_jit_lk_rel);
	o->fsave[1] = AT(r, gb_jit_lk_rel_fsave, gb_jit_lk_rel);
	o->frest[1] = AT(r, gb_jit_lk_rel_frest, gb_jit_lk_rel);
	o->rel_end = AT(r, gb_jit_lk_rel_end, gb_jit_lk_rel);
}

/* gebpf's side: the same protocol with C atomics. */
static uint32_t *lw(struct gb_jit *j, size_t off) { return (uint32_t *)(j->m.data + off); }
static uint32_t *tslot(struct gb_jit *j, uint32_t t)
{
	return lw(j, NS_TSLOT + (size_t)(t % NS_TSLOTS) * 4);
}

uint32_t gb_jit__lock_word(const struct gb_jit *j)
{
	uint32_t s = __atomic_load_n((const uint32_t *)(j->m.data + NS_TSERV), __ATOMIC_ACQUIRE);
	return __atomic_load_n((const uint32_t *)(j->m.data + NS_TNEXT), __ATOMIC_ACQUIRE) - s;
}

int gb_jit__lock_try(struct gb_jit *j)
{
	uint32_t s = __atomic_load_n(lw(j, NS_TSERV), __ATOMIC_ACQUIRE), n = s;
	return __atomic_compare_exchange_n(lw(j, NS_TNEXT), &n, s + 1, false, __ATOMIC_SEQ_CST,
					   __ATOMIC_RELAXED);
}

/* After ticket s is served (SERV == s published): serve the next while s
 * was given up, else wake s's taker if it sleeps. */
static void post(struct gb_jit *j, uint32_t s)
{
	for (;;) {
		uint32_t *w = tslot(j, s), v = __atomic_load_n(w, __ATOMIC_SEQ_CST);
		if (v)
			v = __atomic_exchange_n(w, 0, __ATOMIC_SEQ_CST);
		if (v == 2) {
			s++;
			__atomic_exchange_n(lw(j, NS_TSERV), s, __ATOMIC_SEQ_CST);
			continue;
		}
		if (v == 1)
			syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
		return;
	}
}

void gb_jit__lock_release(struct gb_jit *j)
{
	uint32_t s = __atomic_load_n(lw(j, NS_TSERV), __ATOMIC_ACQUIRE) + 1;
	__atomic_exchange_n(lw(j, NS_TSERV), s, __ATOMIC_SEQ_CST);
	post(j, s);
}

void gb_jit__lock_wake(struct gb_jit *j, uint32_t t)
{
	syscall(SYS_futex, tslot(j, t), FUTEX_WAKE, 1, NULL, NULL, 0);
}

void gb_jit__lock_post(struct gb_jit *j)
{
	post(j, __atomic_load_n(lw(j, NS_TSERV), __ATOMIC_SEQ_CST));
}

int gb_jit__lock_abandon(struct gb_jit *j, uint32_t t)
{
	uint32_t *w = tslot(j, t);
	__atomic_exchange_n(w, 2, __ATOMIC_SEQ_CST); /* (over its 1: its taker is not there) */
	if (__atomic_load_n(lw(j, NS_TSERV), __ATOMIC_SEQ_CST) != t)
		return 0; /* the release that serves it serves the next */
	/* served already: the mark is the releaser's or ours */
	return __atomic_exchange_n(w, 0, __ATOMIC_SEQ_CST) == 2;
}

int gb_jit__lock_try_for(struct gb_jit *j, unsigned us)
{
	if (gb_jit__lock_try(j))
		return 1;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	uint32_t tk = __atomic_fetch_add(lw(j, NS_TNEXT), 1, __ATOMIC_SEQ_CST);
	for (;;) {
		if (__atomic_load_n(lw(j, NS_TSERV), __ATOMIC_ACQUIRE) == tk)
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000000 + (t.tv_nsec - t0.tv_nsec) / 1000 >= (long)us)
			break;
		__builtin_ia32_pause();
	}
	return gb_jit__lock_abandon(j, tk); /* 1: served as it gave up, held */
}
