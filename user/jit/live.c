/* The liveness word (docs/trace.md "Harmless without gebpf"): the code
 * cache's way to know, with one load and no system call, that gebpf is no
 * longer there to serve it, whatever killed it.
 *
 * The word is the lock word of a process-shared robust pthread mutex in the
 * data part (NS_LIVE), which gebpf's tracing thread locks when it takes the
 * cache into service.  glibc puts a robust mutex on the thread's robust
 * list, and the kernel walks that list when the thread ends, however it
 * ends (SIGKILL, the OOM killer, a cgroup's kill): for each mutex the dead
 * thread holds it sets FUTEX_OWNER_DIED (0x40000000) in the word, in the
 * thread's own exit, before it lets go of its tracees (exit_mm comes before
 * exit_notify).  While the owner lives the word holds its tid (below 2^22,
 * the kernel's PID_MAX_LIMIT), so the word's byte 3 (NS_GONE) is 0 exactly
 * while gebpf serves the cache; gebpf sets the same bit itself when it lets
 * go (gb_jit__live_end: the end of a trace, an exec, or a failure).  A
 * zeroed data part reads as served: no patch is written before the lock is
 * taken.
 *
 * The cache's code reads NS_GONE flag-free (movzx + jrcxz) at every entry
 * block (owner.c: a thread then runs the entry's instructions natively
 * from their copy), after every system call of the range (the original
 * code goes on there), in the lock's wait (ticket.c: the ticket given up)
 * and in the ring's slow path (ring.c: dropping at once). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jit/internal.h"

_Static_assert(sizeof(pthread_mutex_t) <= NS_LKTO - NS_LIVE, "the liveness mutex's room");

static pthread_mutex_t *live_mutex(struct gb_jit *j) { return (pthread_mutex_t *)dword(j, NS_LIVE); }

void ns_live_init(struct gb_jit *j)
{
	/* a waiter wakes this often to look at NS_GONE (and at its turn) */
	*dword(j, NS_LKTO) = 0;
	*dword(j, NS_LKTO + 8) = GB_JIT_LOCK_SLEEP_MS * 1000000ull;
}

int gb_jit__live_start(struct gb_jit *j)
{
	if (!j->o.nostop || j->live_held)
		return -EINVAL;
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	int e = pthread_mutex_init(live_mutex(j), &a);
	pthread_mutexattr_destroy(&a);
	if (!e)
		e = pthread_mutex_lock(live_mutex(j));
	if (e == EOWNERDEAD) /* (not after an init; made consistent anyway) */
		e = pthread_mutex_consistent(live_mutex(j));
	if (e)
		return -e;
	j->live_held = true;
	return 0;
}

void gb_jit__live_end(struct gb_jit *j)
{
	if (!j->o.nostop)
		return;
	if (j->live_held) {
		/* off this thread's robust list before gebpf's view goes */
		pthread_mutex_unlock(live_mutex(j));
		pthread_mutex_destroy(live_mutex(j));
		j->live_held = false;
	}
	__atomic_store_n((uint32_t *)dword(j, NS_LIVE), GB_JIT_LIVE_GONE, __ATOMIC_SEQ_CST);
}

bool gb_jit__live(const struct gb_jit *j)
{
	return j->o.nostop && !__atomic_load_n(j->m.data + NS_GONE, __ATOMIC_ACQUIRE);
}

void ns_gone_rcx(struct gb_jit *j)
{
	/* movzx ecx, byte [rip+d32]: 0 while gebpf serves the cache */
	struct gb_emit *m = &j->em;
	int64_t d = (int64_t)(daddr(j, NS_GONE) - (gb_emit_here(m) + NS_GONE_LEN));
	uint8_t b[NS_GONE_LEN] = { 0x0f, 0xb6, 0x0d };
	int32_t d32 = (int32_t)d;
	if (d != d32) {
		m->err = -EINVAL;
		return;
	}
	memcpy(b + 3, &d32, 4);
	gb_emit_raw(m, b, sizeof(b));
}

_Static_assert(NS_HDR >= NS_LKTO + 16 && NS_HDR + sizeof(struct gb_jit_hdr) <= NS_TFBIT,
	       "the header's room");

void gb_jit__mark(struct gb_jit *j, const char *module)
{
	if (!j->o.nostop)
		return;
	struct gb_jit_hdr h = { .version = GB_JIT_HDR_VERSION, .size = sizeof(h),
				.code_addr = j->m.code_addr, .start = j->start, .end = j->end,
				.gone_off = NS_GONE, .worker = (int32_t)getpid() };
	memcpy(h.magic, GB_JIT_HDR_MAGIC, sizeof(h.magic));
	snprintf(h.module, sizeof(h.module), "%s", module ? module : "");
	memcpy(j->m.data + NS_HDR, &h, sizeof(h));
}

bool gb_jit__hdr_ok(const struct gb_jit_hdr *h)
{
	return !memcmp(h->magic, GB_JIT_HDR_MAGIC, sizeof(h->magic)) &&
	       h->version == GB_JIT_HDR_VERSION && h->size == sizeof(*h) && h->gone_off == NS_GONE;
}

/* --- ways on: where a block of a stretch under way goes natively once
 * gebpf is gone (ring.c's budget exits) --- */

struct way { uint64_t pc, at; };

static int cmp_way(const void *a, const void *b)
{
	const struct way *x = a, *y = b;
	return x->pc < y->pc ? -1 : x->pc > y->pc ? 1 : x->at < y->at ? -1 : x->at > y->at;
}

size_t gb_jit__ways(struct gb_jit *j)
{
	if (!j->o.nostop)
		return 0;
	/* the instruction copies of the entries' native copies (owner.c):
	 * an instruction strictly inside a patch's 5 bytes runs from there */
	size_t n = 0, set = 0;
	struct way *v = malloc((j->nu + 1) * sizeof(*v));
	if (!v)
		return 0;
	for (size_t k = 0; k < j->nu; k++) {
		const struct unit *u = &j->u[k];
		if (u->kind == U_NS && u->ns == GB_JIT_NS_NATIVE && !u->tgt)
			v[n++] = (struct way){ u->pc, j->m.code_addr + u->off };
	}
	qsort(v, n, sizeof(*v), cmp_way);
	for (size_t k = 0; k < j->nu; k++) {
		const struct unit *u = &j->u[k];
		uint64_t way;
		if (u->kind != U_NS || u->ns != GB_JIT_NS_RING || u->off == j->ro.slow || !u->o_way)
			continue;
		memcpy(&way, j->m.code + u->o_way, 8);
		if (way)
			continue;
		way = u->pc; /* its original code, where no patch covers it */
		bool entry = false;
		for (size_t e = 0; e < j->nen && !entry; e++)
			entry = j->en[e].pc == u->pc; /* (a patched entry jumps to its check) */
		size_t lo = 0, hi = n;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (v[mid].pc < u->pc)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (!entry && lo < n && v[lo].pc == u->pc)
			way = v[lo].at;
		__atomic_store_n((uint64_t *)(j->m.code + u->o_way), way, __ATOMIC_RELEASE);
		set++;
	}
	free(v);
	return set;
}

uint64_t gb_jit__native_at(const struct gb_jit *j, uint64_t pc)
{
	for (size_t k = 0; j->o.nostop && k < j->nu; k++) {
		const struct unit *u = &j->u[k];
		if (u->kind == U_NS && u->ns == GB_JIT_NS_NATIVE && u->pc == pc && !u->tgt)
			return j->m.code_addr + u->off;
	}
	return 0;
}
