/* The stop-free mode's owner check (docs/trace.md "The patch trap",
 * "Ending"): an entry block first makes sure the thread running it is its
 * area's owner, so that a thread made after gebpf's worker died (it
 * inherits its creator's gs base, so its area: nobody gives it one) never
 * writes into another thread's area.  Such a thread runs the instructions
 * under the entry's patch natively from a copy (reloc.h: branches and calls
 * relocated, a call pushing its original return address) and goes on at
 * the original code after them, or at a branch's target: unrecorded, and
 * touching no area, lock or ring.
 *
 * Before the check no register is free and the area may be another
 * thread's, so the two it needs are saved on the thread's own stack, below
 * the ABI's 128-byte red zone (memory a signal frame may overwrite at any
 * instruction: the program keeps nothing there).  The owner is named by a
 * key of its own, the area holding its negation (T_NEGFS, written by
 * gb_jit__area_fs), so that an lea and a jrcxz compare it without touching
 * the flags.  The key is the thread's fs base (its TLS: each thread's own),
 * read with rdfsbase where the kernel and the CPU have FSGSBASE (Linux 5.9,
 * AT_HWCAP2); elsewhere (a CPU or a hypervisor that hides it) it is the
 * word at fs:0, which the x86-64 TLS ABI makes the thread's own TCB
 * address (glibc's and musl's self-pointer: equal to the fs base), the
 * area holding the word its owner had there (gb_jit__area_fs reads it).  An
 * owner without an fs base (a program without TLS, or before it set it up)
 * has the key 0, and the check then ends at its first jrcxz, with no load
 * from fs:0 (which would fault): a thread it makes without a TLS of its own
 * has the same fs base, so rdfsbase could not tell them apart either.
 *
 *   lea rsp, [rsp-256]; mov [rsp], rax; mov [rsp+8], rcx
 *   movzx ecx, byte [NS_GONE]; jrcxz served; jmp short notown   (live.c)
 *   served: mov rcx, gs:[T_NEGFS]; jrcxz own          (rdfsbase: 2-byte nop)
 *   mov rax, fs:[0]                                   (rdfsbase rax; 4-byte nop)
 *   lea rcx, [rcx+rax]; jrcxz own
 *   notown: mov rcx, [rsp+8]; mov rax, [rsp]; lea rsp, [rsp+256]; jmp native
 *   own: mov rcx, [rsp+8]; mov rax, [rsp]; lea rsp, [rsp+256]
 *   (the lock's acquire, as before)
 *
 * The first test is the liveness word's (live.c): once gebpf is gone every
 * thread takes the native copy, the area's owner too, touching no area,
 * lock or ring: the entry costs this check and two jumps from then on.
 *
 * Both forms have the same length and offsets, so one unwinder serves.
 * gb_jit_opts.owner_check turns the check on, owner_tcb picks the fs:0
 * form. */
#include <errno.h>
#include <string.h>
#include <sys/user.h>

#include "common/bound.h"
#include "jit/internal.h"
#include "jit/reloc.h"

static const uint8_t P_SUB[] = { 0x48, 0x8d, 0xa4, 0x24, 0x00, 0xff, 0xff, 0xff };
static const uint8_t P_SAVE_RAX[] = { 0x48, 0x89, 0x04, 0x24 };
static const uint8_t P_SAVE_RCX[] = { 0x48, 0x89, 0x4c, 0x24, 0x08 };
/* rdfsbase rax; nop dword [rax+0]: as long as the load below */
static const uint8_t P_RDFSBASE[] = { 0xf3, 0x48, 0x0f, 0xae, 0xc0, 0x0f, 0x1f, 0x40, 0x00 };
/* mov rax, fs:[0] (the TCB's self-pointer) */
static const uint8_t P_LOAD_TCB[] = { 0x64, 0x48, 0x8b, 0x04, 0x25, 0x00, 0x00, 0x00, 0x00 };
static const uint8_t P_NOP2[] = { 0x66, 0x90 };
static const uint8_t P_ADD[] = { 0x48, 0x8d, 0x0c, 0x01 };       /* lea rcx, [rcx+rax] */
static const uint8_t P_LOAD_RCX[] = { 0x48, 0x8b, 0x4c, 0x24, 0x08 };
static const uint8_t P_LOAD_RAX[] = { 0x48, 0x8b, 0x04, 0x24 };
static const uint8_t P_UNSUB[] = { 0x48, 0x8d, 0xa4, 0x24, 0x00, 0x01, 0x00, 0x00 };

/* Offsets in the check (from the entry unit's start): see unwind.c's use. */
enum {
	C_SAVED_RAX = 12, C_SAVED_RCX = 17, C_GONE = 17, C_KEY0 = 37, C_LOAD = 39, C_JRCXZ = 52,
	C_NOTOWN = 54, C_RCX_BACK = 59, C_RAX_BACK = 63, C_RSP_BACK = 71, C_OWN = 76,
	C_OWN_RAX = 81, C_OWN_RSP = 85, C_END = 93,
};

static void restore(struct gb_emit *m)
{
	gb_emit_raw(m, P_LOAD_RCX, sizeof(P_LOAD_RCX));
	gb_emit_raw(m, P_LOAD_RAX, sizeof(P_LOAD_RAX));
	gb_emit_raw(m, P_UNSUB, sizeof(P_UNSUB));
}

/* The instructions at pc that an entry's patch of len bytes covers (5, or
 * 2 for a short jump: jit/patch.h), at most 5; 0 when they cannot run from
 * a copy in the code region (reloc.h).  Not one more: the copy goes on at
 * the next, which may be an entry of its own, patched. */
static unsigned covered(const struct gb_jit *j, uint64_t pc, unsigned len, gb_jit_fetch_fn fetch,
			void *ctx, struct gb_insn *out)
{
	unsigned n = 0;
	for (uint64_t a = pc; a < pc + len; n++) {
		const struct gb_insn *gi = n < GB_RELOC_MAX ? fetch(ctx, a) : NULL;
		if (!gi)
			return 0;
		out[n] = *gi;
		a += gi->len;
	}
	uint64_t lo = j->m.code_addr, hi = lo + GB_JIT_CODE_SIZE;
	return gb_reloc_ok(out, n, lo, hi) ? n : 0;
}

/* The native copy (reloc.c): a unit per piece, pc the original
 * instruction a thread stopped there stands at (tgt: its rsp below the
 * original's by that much, a call's push done). */
static uint64_t native_copy(struct gb_jit *j, const struct gb_insn *in, unsigned n)
{
	struct gb_reloc rl;
	uint64_t at = gb_emit_here(&j->em);
	if (gb_reloc_emit(&j->em, in, n, &rl))
		return 0;
	for (unsigned k = 0; k < rl.n; k++) {
		struct unit *u = jit_unit_add(j, U_NS, rl.p[k].pc);
		if (!u)
			return 0;
		u->ns = GB_JIT_NS_NATIVE;
		u->off = rl.p[k].off;
		u->end = k + 1 < rl.n ? rl.p[k + 1].off : (uint32_t)j->em.used;
		u->tgt = rl.p[k].rsp_up;
	}
	return at;
}

unsigned ns_owner_check(struct gb_jit *j, struct unit *u, uint64_t pc, unsigned len,
			gb_jit_fetch_fn fetch, void *ctx, struct gb_insn in[5], size_t *to_native)
{
	unsigned n = j->o.owner_check && fetch ? covered(j, pc, len, fetch, ctx, in) : 0;
	if (!n)
		return 0;
	struct gb_emit *m = &j->em;
	size_t start = m->used;
	gb_emit_raw(m, P_SUB, sizeof(P_SUB));
	gb_emit_raw(m, P_SAVE_RAX, sizeof(P_SAVE_RAX));
	gb_emit_raw(m, P_SAVE_RCX, sizeof(P_SAVE_RCX));
	/* gebpf gone (live.c): the native copy, whoever the thread is */
	ns_gone_rcx(j);
	gb_emit_jrcxz(m, gb_emit_here(m) + 2 + 2);
	gb_emit_jmp8(m, j->em.base + start + C_NOTOWN);
	gb_emit_tls_load(m, GB_REG_RCX, T_NEGFS);
	if (j->o.owner_tcb) {
		gb_emit_jrcxz(m, gb_emit_here(m) + (C_OWN - C_KEY0)); /* key 0: no fs base */
		gb_emit_raw(m, P_LOAD_TCB, sizeof(P_LOAD_TCB));
	} else {
		gb_emit_raw(m, P_NOP2, sizeof(P_NOP2));
		gb_emit_raw(m, P_RDFSBASE, sizeof(P_RDFSBASE));
	}
	gb_emit_raw(m, P_ADD, sizeof(P_ADD));
	gb_emit_jrcxz(m, gb_emit_here(m) + 2 + (C_OWN - C_JRCXZ - 2));
	if (!m->err && m->used - start != C_NOTOWN)
		m->err = -EINVAL;
	restore(m);
	*to_native = gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, gb_emit_here(m));
	restore(m);
	if (m->err || m->used - start != C_END) {
		m->err = m->err ? m->err : -EINVAL;
		return 0;
	}
	u->owner_chk = true;
	j->stats.owner_checks++;
	return n;
}

void ns_owner_native(struct gb_jit *j, const struct gb_insn *in, unsigned n, size_t to_native)
{
	uint64_t at = n ? native_copy(j, in, n) : 0;
	if (at)
		gb_emit_repoint(&j->em, to_native, at);
}

/* A thread stopped in an entry unit's check (d: rip's offset from the
 * unit's start): rax, rcx and rsp as they were at the entry.  0; 1 when d
 * is past the check; -EFAULT when its stack cannot be read. */
int ns_owner_unwind(const struct gb_jit *j, const struct unit *u, uint32_t d, uint64_t *rax,
		    uint64_t *rcx, uint64_t *rsp)
{
	if (!u->owner_chk || d >= C_END)
		return 1;
	bool moved = (d >= 8 && d < C_RSP_BACK) || d >= C_OWN;
	bool ax = (d >= C_SAVED_RAX && d < C_RAX_BACK) || (d >= C_OWN && d < C_OWN_RSP);
	bool cx = (d >= C_SAVED_RCX && d < C_RCX_BACK) || (d >= C_OWN && d < C_OWN_RAX);
	uint64_t sp = *rsp, v[2];
	if ((ax || cx) && (!j->o.read || j->o.read(j->o.read_ctx, sp, v, sizeof(v))))
		return -EFAULT;
	if (ax)
		*rax = v[0];
	if (cx)
		*rcx = v[1];
	if (moved)
		*rsp = sp + 256;
	return 0;
}

/* The check's own stores faulted (less than 256 bytes of stack below rsp:
 * a program running on the last bytes of a page, a signal of its own on
 * its alternate stack), or its load from fs:0 did (an fs base that is not
 * a TCB's): the thread goes on past the check, as its owner (with gebpf
 * there every thread is its area's owner).  rax and rcx are still the
 * program's at each of them. */
bool gb_jit__owner_fault(const struct gb_jit *j, struct user_regs_struct *r)
{
	struct gb_jit_loc loc;
	if (!j->o.nostop || gb_jit__locate(j, r->rip, &loc) || loc.ns != GB_JIT_NS_ENTRY)
		return false;
	uint64_t off = r->rip - j->m.code_addr;
	size_t lo = GB_UPPER(j->u, j->nu, off, off); /* (locate found it: lo > 0) */
	const struct unit *u = &j->u[lo - 1];
	uint64_t d = off - u->off;
	if (!u->owner_chk || (d != sizeof(P_SUB) && d != C_SAVED_RAX && d != C_LOAD))
		return false;
	r->rsp += 256;
	r->rip = j->m.code_addr + u->off + C_END;
	return true;
}
