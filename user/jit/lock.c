/* The stop-free mode's lock (docs/trace.md "A trap without stops (in
 * progress)"): one word of the data part, NS_LOCK, serializes in-range
 * stretches.  It is a futex mutex in the shape of Drepper's "Futexes Are
 * Tricky" (0 free, 1 held, 2 held with waiters), built on xchg alone:
 * xchg with memory is atomic and leaves the flags alone, so taking and
 * releasing need no flag save.
 *
 *   acquire:  if (xchg(L, 1) == 0) done;
 *             while (xchg(L, 2) != 0) futex(L, FUTEX_WAIT, 2);
 *   release:  if (xchg(L, 0) == 2) futex(L, FUTEX_WAKE, 1);
 *
 * Both are shared routines at the start of the code; a site calls one by
 * saving rax and rcx in its thread's area (gs-relative: the data part's
 * per-thread areas are the threads' gs bases), storing its continuation in
 * T_RET and jumping; the routine returns with jmp gs:[T_RET].  Nothing here
 * touches the program's stack. */
#include <errno.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/grow.h"
#include "jit/internal.h"

/* jrcxz whose target is fixed later (jrcxz_to). */
static size_t jrcxz_here(struct gb_emit *m)
{
	size_t at = m->used;
	gb_emit_jrcxz(m, gb_emit_here(m) + 2);
	return at;
}

static void jrcxz_to(struct gb_emit *m, size_t at, uint64_t dst)
{
	int64_t rel = (int64_t)dst - (int64_t)(m->base + at + 2);
	if (m->err)
		return;
	if (rel < -128 || rel > 127) {
		m->err = -EINVAL;
		return;
	}
	m->buf[at + 1] = (uint8_t)(int8_t)rel;
}

static void tls_save(struct gb_emit *m, const uint8_t *regs, const int32_t *slots, unsigned n)
{
	for (unsigned k = 0; k < n; k++)
		gb_emit_tls_store(m, slots[k], regs[k]);
}

static void tls_restore(struct gb_emit *m, const uint8_t *regs, const int32_t *slots, unsigned n)
{
	for (unsigned k = n; k-- > 0;)
		gb_emit_tls_load(m, regs[k], slots[k]);
}

/* futex(L, op, val) with rax and rcx saved already (the others here);
 * call k of the two (unwind.c). */
static void futex_call(struct gb_jit *j, int op, uint32_t val, unsigned k)
{
	static const uint8_t regs[] = { GB_REG_RDX, GB_REG_RSI, GB_REG_RDI, GB_REG_R10, GB_REG_R11 };
	static const int32_t slots[] = { T_RDX, T_RSI, T_RDI, T_R10, T_R11 };
	struct gb_emit *m = &j->em;
	j->ro.fsave[k] = (uint32_t)m->used;
	tls_save(m, regs, slots, 5);
	gb_emit_mov_imm32(m, GB_REG_RAX, SYS_futex);
	gb_emit_lea_rip(m, GB_REG_RDI, daddr(j, NS_LOCK));
	gb_emit_mov_imm32(m, GB_REG_RSI, (uint32_t)op);
	gb_emit_mov_imm32(m, GB_REG_RDX, val);
	gb_emit_mov_imm32(m, GB_REG_R10, 0); /* no timeout */
	gb_emit_syscall(m);
	j->ro.frest[k] = (uint32_t)m->used;
	tls_restore(m, regs, slots, 5);
	j->ro.fend[k] = (uint32_t)m->used;
}

static const uint8_t MOV_ECX_EAX[] = { 0x89, 0xc1 };
static const uint8_t LEA_ECX_RAX_M2[] = { 0x8d, 0x48, 0xfe };  /* lea ecx, [rax-2] */

void ns_routines(struct gb_jit *j)
{
	struct gb_emit *m = &j->em;
	struct unit *u = jit_unit_add(j, U_NS, 0);
	if (!u)
		return;
	u->ns = GB_JIT_NS_LOCK;
	/* acquire */
	j->acq = gb_emit_here(m);
	j->ro.acq = (uint32_t)m->used;
	gb_emit_mov_imm32(m, GB_REG_RAX, 1);
	gb_emit_xchg32(m, daddr(j, NS_LOCK), GB_REG_RAX);
	j->ro.x1 = (uint32_t)m->used;
	gb_emit_raw(m, MOV_ECX_EAX, sizeof(MOV_ECX_EAX));
	size_t ok1 = jrcxz_here(m);
	size_t to_a2 = gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, gb_emit_here(m));
	uint64_t got = gb_emit_here(m);
	j->ro.got = (uint32_t)m->used;
	jrcxz_to(m, ok1, got);
	/* taken: the stretch's marker (the area's word) at the ring's head */
	gb_emit_load(m, GB_REG_RAX, daddr(j, HEAD));
	gb_emit_tls_load(m, GB_REG_RCX, T_MARK);
	gb_emit_store_reg(m, GB_REG_RAX, 0, GB_REG_RCX);
	gb_emit_lea(m, GB_REG_RAX, GB_REG_RAX, GB_REG_NONE, 0, 8);
	j->ro.mark_commit = (uint32_t)m->used;
	gb_emit_store(m, daddr(j, HEAD), GB_REG_RAX);
	j->ro.marked = (uint32_t)m->used;
	gb_emit_tls_jmp(m, T_RET);
	uint64_t a2 = gb_emit_here(m);
	if (!m->err)
		gb_emit_repoint(m, to_a2, a2);
	j->ro.a2 = (uint32_t)m->used;
	gb_emit_mov_imm32(m, GB_REG_RAX, 2);
	gb_emit_xchg32(m, daddr(j, NS_LOCK), GB_REG_RAX);
	j->ro.x2 = (uint32_t)m->used;
	gb_emit_raw(m, MOV_ECX_EAX, sizeof(MOV_ECX_EAX));
	size_t ok2 = jrcxz_here(m);
	size_t to_wait = gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, gb_emit_here(m));
	jrcxz_to(m, ok2, gb_emit_here(m));
	gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, got);
	if (!m->err)
		gb_emit_repoint(m, to_wait, gb_emit_here(m));
	j->ro.wait = (uint32_t)m->used;
	futex_call(j, FUTEX_WAIT, 2, 0);
	gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, a2);
	j->ro.acq_end = (uint32_t)m->used;
	/* release */
	j->rel = gb_emit_here(m);
	j->ro.rel = (uint32_t)m->used;
	gb_emit_mov_imm32(m, GB_REG_RAX, 0);
	gb_emit_xchg32(m, daddr(j, NS_LOCK), GB_REG_RAX);
	j->ro.xr = (uint32_t)m->used;
	gb_emit_raw(m, LEA_ECX_RAX_M2, sizeof(LEA_ECX_RAX_M2));
	size_t wake = jrcxz_here(m);
	gb_emit_tls_jmp(m, T_RET);
	jrcxz_to(m, wake, gb_emit_here(m));
	futex_call(j, FUTEX_WAKE, 1, 1);
	gb_emit_tls_jmp(m, T_RET);
	j->ro.rel_end = (uint32_t)m->used;
	jit_unit_end(j, u);
	ns_ring_routine(j);
}

/* Call a shared routine: rax and rcx saved around it in the thread's area. */
static void ns_call(struct gb_jit *j, uint64_t routine)
{
	struct gb_emit *m = &j->em;
	if (GB_GROW(&j->cs, &j->cscap, j->ncs + 1)) {
		m->err = -ENOMEM;
		return;
	}
	struct nscall *c = &j->cs[j->ncs++];
	c->off = (uint32_t)m->used;
	c->acq = routine == j->acq;
	gb_emit_tls_store(m, T_RAX, GB_REG_RAX);
	gb_emit_tls_store(m, T_RCX, GB_REG_RCX);
	c->o_saved = (uint32_t)m->used;
	size_t lea = m->used;
	gb_emit_lea_rip(m, GB_REG_RCX, gb_emit_here(m));
	gb_emit_tls_store(m, T_RET, GB_REG_RCX);
	gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, routine);
	if (!m->err)
		gb_emit_repoint(m, lea + 3, gb_emit_here(m)); /* lea rcx, [rip+d32]: 48 8d 0d d32 */
	c->o_ret = (uint32_t)m->used;
	gb_emit_tls_load(m, GB_REG_RCX, T_RCX);
	gb_emit_tls_load(m, GB_REG_RAX, T_RAX);
	c->o_end = (uint32_t)m->used;
}

void ns_acquire(struct gb_jit *j) { ns_call(j, j->acq); }
void ns_release(struct gb_jit *j) { ns_call(j, j->rel); }

void ns_leave(struct gb_jit *j, uint64_t target)
{
	ns_release(j);
	gb_emit_jump(&j->em, ZYDIS_MNEMONIC_JMP, target);
}

void ns_syscall(struct gb_jit *j, const struct gb_insn *gi)
{
	struct unit *u = jit_unit_add(j, U_NS, gi->pc);
	if (!u)
		return;
	u->ns = GB_JIT_NS_SYSCALL;
	ns_release(j);
	gb_emit_raw(&j->em, gi->bytes, gi->len);
	u->o_insn = (uint32_t)j->em.used;
	/* rcx: the return address the kernel leaves is the original one */
	gb_emit_mov_imm64(&j->em, GB_REG_RCX, gi->pc + gi->len);
	ns_acquire(j);
	jit_unit_end(j, u);
}

uint64_t ns_entry_block(struct gb_jit *j, uint64_t pc, uint64_t blk, gb_jit_fetch_fn fetch,
			void *ctx)
{
	struct gb_insn in[5];
	size_t to_native = 0;
	if (GB_GROW(&j->en, &j->encap, j->nen + 1))
		return 0;
	size_t mark_u = j->nu, mark_used = j->em.used, mark_cs = j->ncs;
	uint64_t at = gb_emit_here(&j->em);
	struct unit *u = jit_unit_add(j, U_NS, pc);
	if (!u)
		return 0;
	u->ns = GB_JIT_NS_ENTRY;
	unsigned n = ns_owner_check(j, u, pc, fetch, ctx, in, &to_native);
	ns_acquire(j);
	gb_emit_jump(&j->em, ZYDIS_MNEMONIC_JMP, blk);
	jit_unit_end(j, u);
	ns_owner_native(j, in, n, to_native);
	if (j->em.err) {
		j->nu = mark_u;
		j->ncs = mark_cs;
		j->em.used = mark_used;
		j->em.err = 0;
		return 0;
	}
	j->en[j->nen++] = (struct entry){ pc, at };
	j->stats.entries++;
	return at;
}

uint64_t gb_jit__tls(const struct gb_jit *j, unsigned k)
{
	return k < GB_JIT_TLS_COUNT ? daddr(j, NS_TLS + (size_t)k * GB_JIT_TLS_SIZE) : 0;
}

int gb_jit__lock_try(struct gb_jit *j)
{
	uint32_t free_ = 0;
	return __atomic_compare_exchange_n((uint32_t *)(j->m.data + NS_LOCK), &free_, 1, false,
					   __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

int gb_jit__lock_try_for(struct gb_jit *j, unsigned us)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (gb_jit__lock_word(j) == 0 && gb_jit__lock_try(j))
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000000 + (t.tv_nsec - t0.tv_nsec) / 1000 >= (long)us)
			return 0;
		__builtin_ia32_pause();
	}
}

void gb_jit__lock_release(struct gb_jit *j)
{
	uint32_t *w = (uint32_t *)(j->m.data + NS_LOCK);
	if (__atomic_exchange_n(w, 0, __ATOMIC_SEQ_CST) == 2)
		syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

uint64_t gb_jit__enter_held(struct gb_jit *j, unsigned k, uint64_t pc, gb_jit_fetch_fn fetch,
			    void *ctx)
{
	uint64_t blk = j->o.nostop && k < GB_JIT_TLS_COUNT ? gb_jit__block(j, pc, fetch, ctx) : 0;
	uint64_t h = *(volatile uint64_t *)dword(j, HEAD);
	if (!blk || h < j->m.data_addr || h + 8 > j->m.data_addr + GB_JIT_DATA_SIZE)
		return 0;
	/* (a block's budget counts one marker before its head: an entry's) */
	*(volatile uint64_t *)(j->m.data + (h - j->m.data_addr)) = NS_MARK | k;
	__atomic_store_n(dword(j, HEAD), h + 8, __ATOMIC_RELEASE);
	return blk;
}

static uint64_t *area(struct gb_jit *j, unsigned k, size_t slot)
{
	return (uint64_t *)(j->m.data + NS_TLS + (size_t)k * GB_JIT_TLS_SIZE + slot);
}

/* Every area's marker (at start: the data part is not cleared by a flush). */
void ns_areas_init(struct gb_jit *j)
{
	for (unsigned k = 0; k < GB_JIT_TLS_COUNT; k++)
		*area(j, k, T_MARK) = NS_MARK | k;
}

void gb_jit__area_fs(struct gb_jit *j, unsigned k, uint64_t fs_base)
{
	if (k >= GB_JIT_TLS_COUNT)
		return;
	j->fs[k] = fs_base;
	*area(j, k, T_NEGFS) = -fs_base; /* (owner.c) */
}

void gb_jit__area_clone(struct gb_jit *j, unsigned child, unsigned parent)
{
	if (child >= GB_JIT_TLS_COUNT || parent >= GB_JIT_TLS_COUNT || child == parent)
		return;
	memcpy(area(j, child, 0), area(j, parent, 0), GB_JIT_TLS_SIZE);
	*area(j, child, T_MARK) = NS_MARK | child;
	j->fs[child] = j->fs[parent];
}

uint64_t gb_jit__lookup_target(const struct gb_jit *j, uint64_t gs_base)
{
	uint64_t lo = daddr(j, NS_TLS), k = (gs_base - lo) / GB_JIT_TLS_SIZE;
	if (gs_base < lo || k >= GB_JIT_TLS_COUNT || (gs_base - lo) % GB_JIT_TLS_SIZE)
		return 0;
	return *(volatile uint64_t *)(j->m.data + NS_TLS + k * GB_JIT_TLS_SIZE + T_TGT);
}

uint32_t gb_jit__lock_word(const struct gb_jit *j)
{
	return *(volatile uint32_t *)(j->m.data + NS_LOCK);
}

void gb_jit__misses(struct gb_jit *j, struct gb_jit_misses *out, bool clear)
{
	const uint64_t *log = dword(j, NS_MISSLOG);
	uint64_t n = __atomic_load_n(dword(j, NS_MISSES), __ATOMIC_ACQUIRE);
	out->count = n;
	out->n = n < GB_JIT_MISS_LOG ? (size_t)n : GB_JIT_MISS_LOG;
	for (size_t k = 0; k < out->n; k++)
		out->pc[k] = log[(n - out->n + k) % GB_JIT_MISS_LOG];
	if (clear)
		__atomic_store_n(dword(j, NS_MISSES), 0, __ATOMIC_RELEASE);
}
