/* The stop-free mode's lock (docs/trace.md "A trap without stops: the
 * translator's stop-free mode"), the sites that take and release it: it
 * serializes in-range stretches.  Its two routines (ticket.c: a ticket
 * lock) are shared, at the start of the code; a site calls one by saving
 * rax and rcx in its thread's area (gs-relative: the data part's per-thread
 * areas are the threads' gs bases), storing its continuation in T_RET and
 * jumping; the routine returns with jmp gs:[T_RET].  Nothing here touches
 * the program's stack. */
#include <errno.h>
#include <string.h>

#include "common/grow.h"
#include "jit/internal.h"

void ns_routines(struct gb_jit *j)
{
	struct unit *u = jit_unit_add(j, U_NS, 0);
	if (!u)
		return;
	u->ns = GB_JIT_NS_LOCK;
	ns_lock_routines(j);
	jit_unit_end(j, u);
	ns_ring_routine(j);
}

/* Counting mode (twin.c, docs/trace.md "Counting after the budget"): an
 * acquire site jumps through its twin word, which holds the twin of pc once
 * the twin pass has published it and until then the site's own way on
 * (lock, below): flag-free, rax and rcx saved in the area already (rcx back
 * from there, rax untouched):
 *
 *   movzx ecx, byte [NS_COUNT] ; jrcxz lock
 *   mov rcx, gs:[T_RCX] ; jmp qword [rip+word]
 *   (padding) word: .quad lock                  (8-aligned: stored whole)
 *   lock: ...
 *
 * A stop anywhere in it is before the site's point of no return: unwind.c
 * reads it as the site's saves (rax, rcx from the area, nothing taken). */
static void twin_check(struct gb_jit *j, uint64_t pc)
{
	struct gb_emit *m = &j->em;
	static const uint8_t JMP_RIP[] = { 0xff, 0x25 };
	int64_t d = (int64_t)(daddr(j, NS_COUNT) - (gb_emit_here(m) + 7));
	uint8_t mz[7] = { 0x0f, 0xb6, 0x0d };
	int32_t d32 = (int32_t)d;
	if (d != d32) {
		m->err = -EINVAL;
		return;
	}
	memcpy(mz + 3, &d32, 4);
	gb_emit_raw(m, mz, sizeof(mz));
	size_t j1 = m->used;
	gb_emit_jrcxz(m, gb_emit_here(m) + 2);
	gb_emit_tls_load(m, GB_REG_RCX, T_RCX);
	size_t jw = m->used;
	gb_emit_raw(m, JMP_RIP, sizeof(JMP_RIP));
	gb_emit_raw(m, (const uint8_t[4]){ 0 }, 4);
	while (!m->err && m->used % 8)
		gb_emit_raw(m, (const uint8_t[1]){ 0xcc }, 1);
	size_t word = m->used;
	gb_emit_raw(m, (const uint8_t[8]){ 0 }, 8);
	if (m->err)
		return;
	int32_t rel = (int32_t)(word - (jw + 6));
	memcpy(m->buf + jw + 2, &rel, 4);
	size_t lock = m->used;
	uint64_t at = gb_emit_here(m);
	memcpy(m->buf + word, &at, 8);
	if (lock - (j1 + 2) > 127) {
		m->err = -EINVAL;
		return;
	}
	m->buf[j1 + 1] = (uint8_t)(lock - (j1 + 2));
	ns_twin_slot(j, pc, (uint32_t)word);
}

/* Call a shared routine: rax and rcx saved around it in the thread's area.
 * An acquire's site says where its thread goes on without the lock once
 * gebpf is gone (T_BAIL: bail, or 0 to wait on; live.c). */
static void ns_call(struct gb_jit *j, uint64_t routine, uint64_t bail, uint64_t twpc)
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
	if (c->acq && twpc)
		twin_check(j, twpc);
	if (c->acq) {
		gb_emit_mov_imm64(m, GB_REG_RCX, bail);
		gb_emit_tls_store(m, T_BAIL, GB_REG_RCX);
	}
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

void ns_acquire(struct gb_jit *j, uint64_t bail) { ns_call(j, j->acq, bail, 0); }
void ns_release(struct gb_jit *j) { ns_call(j, j->rel, 0, 0); }

void ns_acquire_tw(struct gb_jit *j, uint64_t bail, uint64_t pc)
{
	ns_call(j, j->acq, bail, j->o.twins ? pc : 0);
}

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
	uint64_t next = gi->pc + gi->len;
	ns_release(j);
	gb_emit_raw(&j->em, gi->bytes, gi->len);
	u->o_insn = (uint32_t)j->em.used;
	/* gebpf gone (live.c): the original code goes on after the call,
	 * with no area, lock or ring touched (a clone's child made here
	 * shares its parent's area), rcx the original return address as
	 * the kernel leaves it natively */
	ns_gone_rcx(j);
	size_t jr = j->em.used;
	gb_emit_jrcxz(&j->em, gb_emit_here(&j->em) + 2); /* (to the acquire: below) */
	gb_emit_mov_imm64(&j->em, GB_REG_RCX, next);
	gb_emit_jump(&j->em, ZYDIS_MNEMONIC_JMP, next);
	if (!j->em.err && j->em.used - (jr + 2) < 128)
		j->em.buf[jr + 1] = (uint8_t)(j->em.used - (jr + 2));
	else
		j->em.err = j->em.err ? j->em.err : -EINVAL;
	/* rcx: the return address the kernel leaves is the original one */
	gb_emit_mov_imm64(&j->em, GB_REG_RCX, next);
	ns_acquire_tw(j, next, next); /* (counting: the twin of what follows) */
	jit_unit_end(j, u);
}

uint64_t ns_entry_block(struct gb_jit *j, uint64_t pc, unsigned len, uint64_t blk,
			gb_jit_fetch_fn fetch, void *ctx)
{
	struct gb_insn in[5];
	size_t to_native = 0;
	if (GB_GROW(&j->en, &j->encap, j->nen + 1))
		return 0;
	size_t mark_u = j->nu, mark_used = j->em.used, mark_cs = j->ncs, mark_ts = j->nts;
	uint64_t at = gb_emit_here(&j->em);
	struct unit *u = jit_unit_add(j, U_NS, pc);
	if (!u)
		return 0;
	u->ns = GB_JIT_NS_ENTRY;
	unsigned n = ns_owner_check(j, u, pc, len, fetch, ctx, in, &to_native);
	/* gone while it waits: this block again, whose check sends it to the
	 * native copy (without one it waits on) */
	ns_acquire_tw(j, n ? at : 0, pc);
	gb_emit_jump(&j->em, ZYDIS_MNEMONIC_JMP, blk);
	jit_unit_end(j, u);
	ns_owner_native(j, in, n, to_native);
	if (j->em.err) {
		j->nu = mark_u;
		j->ncs = mark_cs;
		j->nts = mark_ts;
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
	uint64_t key = fs_base, tcb;
	if (j->o.owner_tcb && fs_base && j->o.read && !j->o.read(j->o.read_ctx, fs_base, &tcb, 8))
		key = tcb;
	j->fs[k] = fs_base;
	*area(j, k, T_NEGFS) = -key; /* (owner.c) */
}

void gb_jit__area_clone(struct gb_jit *j, unsigned child, unsigned parent)
{
	if (child >= GB_JIT_TLS_COUNT || parent >= GB_JIT_TLS_COUNT || child == parent)
		return;
	memcpy(area(j, child, 0), area(j, parent, 0), GB_JIT_TLS_SIZE);
	*area(j, child, T_MARK) = NS_MARK | child;
	ns_count_area_new(j, child); /* (the parent's counts are the parent's) */
	j->fs[child] = j->fs[parent];
}

uint64_t gb_jit__lookup_target(const struct gb_jit *j, uint64_t gs_base)
{
	uint64_t lo = daddr(j, NS_TLS), k = (gs_base - lo) / GB_JIT_TLS_SIZE;
	if (gs_base < lo || k >= GB_JIT_TLS_COUNT || (gs_base - lo) % GB_JIT_TLS_SIZE)
		return 0;
	return *(volatile uint64_t *)(j->m.data + NS_TLS + k * GB_JIT_TLS_SIZE + T_TGT);
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
	ns_twin_misses(j, out, clear); /* (the twins': twin.c) */
}
