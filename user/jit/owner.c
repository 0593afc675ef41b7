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
 * instruction: the program keeps nothing there).  The owner is named by
 * its fs base (each thread's own: its TLS), the area holding its negation
 * (T_NEGFS, written by gb_jit__area_fs), so that an lea and a jrcxz
 * compare it without touching the flags:
 *
 *   lea rsp, [rsp-256]; mov [rsp], rax; mov [rsp+8], rcx
 *   rdfsbase rax; mov rcx, gs:[T_NEGFS]; lea rcx, [rcx+rax]; jrcxz own
 *   mov rcx, [rsp+8]; mov rax, [rsp]; lea rsp, [rsp+256]; jmp native
 *   own: mov rcx, [rsp+8]; mov rax, [rsp]; lea rsp, [rsp+256]
 *   (the lock's acquire, as before)
 *
 * rdfsbase needs the kernel's FSGSBASE support (Linux 5.9, a CPU with it):
 * gb_jit_opts.owner_check is set only then. */
#include <errno.h>
#include <string.h>
#include <sys/user.h>

#include "common/bound.h"
#include "jit/internal.h"
#include "jit/reloc.h"

static const uint8_t P_SUB[] = { 0x48, 0x8d, 0xa4, 0x24, 0x00, 0xff, 0xff, 0xff };
static const uint8_t P_SAVE_RAX[] = { 0x48, 0x89, 0x04, 0x24 };
static const uint8_t P_SAVE_RCX[] = { 0x48, 0x89, 0x4c, 0x24, 0x08 };
static const uint8_t P_RDFSBASE[] = { 0xf3, 0x48, 0x0f, 0xae, 0xc0 };
static const uint8_t P_ADD[] = { 0x48, 0x8d, 0x0c, 0x01 };       /* lea rcx, [rcx+rax] */
static const uint8_t P_LOAD_RCX[] = { 0x48, 0x8b, 0x4c, 0x24, 0x08 };
static const uint8_t P_LOAD_RAX[] = { 0x48, 0x8b, 0x04, 0x24 };
static const uint8_t P_UNSUB[] = { 0x48, 0x8d, 0xa4, 0x24, 0x00, 0x01, 0x00, 0x00 };

/* Offsets in the check (from the entry unit's start): see unwind.c's use. */
enum {
	C_SAVED_RAX = 12, C_SAVED_RCX = 17, C_JRCXZ = 35,
	C_RCX_BACK = 42, C_RAX_BACK = 46, C_RSP_BACK = 54, C_OWN = 59,
	C_OWN_RAX = 64, C_OWN_RSP = 68, C_END = 76,
};

static void restore(struct gb_emit *m)
{
	gb_emit_raw(m, P_LOAD_RCX, sizeof(P_LOAD_RCX));
	gb_emit_raw(m, P_LOAD_RAX, sizeof(P_LOAD_RAX));
	gb_emit_raw(m, P_UNSUB, sizeof(P_UNSUB));
}

/* The instructions at pc that an entry's patch covers (at least 5 bytes:
 * jit/patch.h), at most 5; 0 when they cannot run from a copy in the code
 * region (reloc.h). */
static unsigned covered(const struct gb_jit *j, uint64_t pc, gb_jit_fetch_fn fetch, void *ctx,
			struct gb_insn *out)
{
	unsigned n = 0;
	for (uint64_t a = pc; a < pc + 5; n++) {
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

unsigned ns_owner_check(struct gb_jit *j, struct unit *u, uint64_t pc, gb_jit_fetch_fn fetch,
			void *ctx, struct gb_insn in[5], size_t *to_native)
{
	unsigned n = j->o.owner_check && fetch ? covered(j, pc, fetch, ctx, in) : 0;
	if (!n)
		return 0;
	struct gb_emit *m = &j->em;
	size_t start = m->used;
	gb_emit_raw(m, P_SUB, sizeof(P_SUB));
	gb_emit_raw(m, P_SAVE_RAX, sizeof(P_SAVE_RAX));
	gb_emit_raw(m, P_SAVE_RCX, sizeof(P_SAVE_RCX));
	gb_emit_raw(m, P_RDFSBASE, sizeof(P_RDFSBASE));
	gb_emit_tls_load(m, GB_REG_RCX, T_NEGFS);
	gb_emit_raw(m, P_ADD, sizeof(P_ADD));
	gb_emit_jrcxz(m, gb_emit_here(m) + 2 + (C_OWN - C_JRCXZ - 2));
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
 * its alternate stack): the thread goes on past the check, as its owner. */
bool gb_jit__owner_fault(const struct gb_jit *j, struct user_regs_struct *r)
{
	struct gb_jit_loc loc;
	if (!j->o.nostop || gb_jit__locate(j, r->rip, &loc) || loc.ns != GB_JIT_NS_ENTRY)
		return false;
	uint64_t off = r->rip - j->m.code_addr;
	size_t lo = GB_UPPER(j->u, j->nu, off, off); /* (locate found it: lo > 0) */
	const struct unit *u = &j->u[lo - 1];
	uint64_t d = off - u->off;
	if (!u->owner_chk || (d != sizeof(P_SUB) && d != C_SAVED_RAX))
		return false;
	r->rsp += 256;
	r->rip = j->m.code_addr + u->off + C_END;
	return true;
}
