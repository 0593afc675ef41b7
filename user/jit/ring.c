/* The record ring: see jit.h.  The stop-free mode's protocol (a consumer
 * draining while the program runs, a writer that wakes it, waits for it and
 * gives up on it) is at the end (docs/trace.md "A trap without stops"). */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "jit/internal.h"

static void ns_ring_reset(struct gb_jit *j);

void gb_jit__ring_reset(struct gb_jit *j)
{
	if (j->o.nostop) {
		ns_ring_reset(j);
		return;
	}
	*dword(j, HEAD) = daddr(j, RING);
	*dword(j, BUDGET) = GB_JIT_RING_SIZE / 8 / (j->o.values ? VALS_BLOCK_WORDS : BLOCK_WORDS);
}

size_t gb_jit__ring_words(const struct gb_jit *j) { return j->ring_bytes / 8; }

size_t gb_jit__ring_used(const struct gb_jit *j)
{
	uint64_t h = *(volatile uint64_t *)dword(j, HEAD);
	uint64_t lo = daddr(j, RING), hi = lo + j->ring_bytes;
	if (j->o.nostop && *(volatile uint64_t *)dword(j, NS_DROPPING))
		h = *dword(j, NS_KEPT); /* what was written before it gave up */
	return h >= lo && h <= hi ? (size_t)(h - lo) / 8 : 0;
}

void gb_jit__ring_unwrite(struct gb_jit *j, size_t words)
{
	size_t used = gb_jit__ring_used(j);
	*dword(j, HEAD) = daddr(j, RING) + 8 * (used > words ? used - words : 0);
}

/* An access's address as the program saw it: wrapped at 4 GiB for a
 * 32-bit address, plus its segment's base. */
static uint64_t seg_addr(unsigned flags, uint64_t a, uint64_t fs_base, uint64_t gs_base)
{
	if (flags & GB_REF_ADDR32)
		a = (uint32_t)a;
	if (flags & GB_REF_FS)
		a += fs_base;
	else if (flags & GB_REF_GS)
		a += gs_base;
	return a;
}

/* A gather or sign-masked access (struct insn .vkind): base is its first
 * reference's address before the element's offset (not yet wrapped nor
 * segment-based); the index and mask vectors follow in the record.  One
 * access per element whose mask sign bit is set, in element order. */
static int vec_accesses(const struct insn *in, const struct ref *r, uint64_t base, const uint64_t *w,
			size_t used, size_t *pos, uint64_t fs_base, uint64_t gs_base, struct gb_jit_rec *out)
{
	uint8_t idx[32] = { 0 }, mask[32] = { 0 };
	size_t iw = in->ibytes / 8, mw = in->mbytes / 8;
	if (*pos + iw + mw > used || in->nelem > sizeof(out->acc) / sizeof(out->acc[0]))
		return -EINVAL;
	memcpy(idx, &w[*pos], iw * 8);
	memcpy(mask, &w[*pos + iw], mw * 8);
	*pos += iw + mw;
	for (unsigned i = 0; i < in->nelem; i++) {
		if (!(mask[i * in->elem + in->elem - 1] & 0x80))
			continue;
		int64_t off = (int64_t)i * in->elem;
		if (in->vkind == GB_PLAN_VSIB) {
			int32_t x32;
			int64_t x64;
			memcpy(&x32, &idx[i * in->idx_elem], 4);
			memcpy(&x64, &idx[i * in->idx_elem], in->idx_elem == 8 ? 8 : 4);
			off = (in->idx_elem == 8 ? x64 : x32) * in->scale;
		}
		uint64_t a = seg_addr(r->flags, base + (uint64_t)off, fs_base, gs_base);
		out->acc[out->nacc++] = (struct gb_access){ a, in->elem, r->flags & GB_REF_WRITE };
	}
	return 1;
}

/* An AVX-512 opmask-masked access (struct insn .kreg): the opmask's word
 * follows the address in the record.  One access per active element, in
 * element order (a compress/expand: one of its contiguous elements). */
static int k_accesses(const struct insn *in, const struct ref *r, uint64_t base, const uint64_t *w,
		      size_t used, size_t *pos, uint64_t fs_base, uint64_t gs_base,
		      struct gb_jit_rec *out)
{
	if (*pos >= used || in->nelem > sizeof(out->acc) / sizeof(out->acc[0]))
		return -EINVAL;
	struct gb_plan p = { .kind = in->vkind, .nelem = in->nelem, .elem = in->elem,
			     .lanes = in->lanes, .map = in->kmap, .kreg = in->kreg };
	uint64_t on = gb_plan_kmask_elems(&p, w[(*pos)++]);
	if (in->vkind == GB_PLAN_COMPRESS) {
		unsigned cnt = (unsigned)__builtin_popcountll(on);
		if (cnt)
			out->acc[out->nacc++] = (struct gb_access){
				seg_addr(r->flags, base, fs_base, gs_base), cnt * in->elem,
				r->flags & GB_REF_WRITE };
		return 1;
	}
	for (unsigned i = 0; i < in->nelem; i++)
		if (on >> i & 1)
			out->acc[out->nacc++] = (struct gb_access){
				seg_addr(r->flags, base + (uint64_t)i * in->elem, fs_base, gs_base),
				in->elem, r->flags & GB_REF_WRITE };
	return 1;
}

static int decode_refs(const struct gb_jit *j, const struct insn *in, const uint64_t *w, size_t used,
		       size_t *pos, uint64_t fs_base, uint64_t gs_base, struct gb_jit_rec *out);

static int decode_at(const struct gb_jit *j, size_t used, size_t *pos, uint64_t fs_base,
		     uint64_t gs_base, struct gb_jit_rec *out)
{
	const uint64_t *w = (const uint64_t *)(j->m.data + RING);
	if (*pos >= used)
		return 0;
	uint64_t id = w[(*pos)++];
	out->kind = GB_JIT_REC_INSN;
	out->area = 0;
	if (j->o.nostop && (id & ~NS_MARK_K) == NS_MARK && (id & NS_MARK_K) < GB_JIT_TLS_COUNT) {
		/* (fields, not a whole-record assignment: a record is ~1 KB) */
		out->kind = GB_JIT_REC_MARK;
		out->area = (unsigned)(id & NS_MARK_K);
		out->pc = 0;
		out->len = 0;
		out->nacc = 0;
		return 1;
	}
	if (id >= j->nin)
		return -EINVAL;
	const struct insn *in = &j->in[id];
	out->pc = in->pc;
	out->len = in->len;
	out->nacc = 0;
	out->vals = NULL;
	out->vdone = true; /* (no values: nothing to take) */
	out->vemu = false;
	if (in->vat) { /* --values (vals.c): the words after the addresses */
		size_t start = *pos - 1;
		if (start + in->words > used)
			return -EINVAL;
		out->vals = (const uint8_t *)&w[start + in->vat];
		out->vdone = in->vdone ? w[start + in->vdone] == 1 : !in->emu;
		out->vemu = in->emu;
		int r = decode_refs(j, in, w, used, pos, fs_base, gs_base, out);
		*pos = start + in->words;
		return r;
	}
	return decode_refs(j, in, w, used, pos, fs_base, gs_base, out);
}

static int decode_refs(const struct gb_jit *j, const struct insn *in, const uint64_t *w, size_t used,
		       size_t *pos, uint64_t fs_base, uint64_t gs_base, struct gb_jit_rec *out)
{
	(void)j;
	int64_t adj = 0;
	if (in->bt_bits) { /* the signed bit offset, in whole units */
		if (*pos >= used)
			return -EINVAL;
		uint64_t v = w[(*pos)++];
		int64_t off = in->bt_bits == 16 ? (int16_t)v : in->bt_bits == 32 ? (int32_t)v : (int64_t)v;
		unsigned shift = in->bt_bits == 16 ? 4 : in->bt_bits == 32 ? 5 : 6;
		adj = (off >> shift) * (in->bt_bits / 8);
	}
	for (unsigned k = 0; k < in->nrefs; k++) {
		const struct ref *r = &in->refs[k];
		uint64_t a = (uint64_t)r->disp;
		if (r->rt) {
			if (*pos >= used)
				return -EINVAL;
			a = w[(*pos)++];
		}
		a += (uint64_t)adj;
		if (in->kreg)
			return k_accesses(in, r, a, w, used, pos, fs_base, gs_base, out);
		if (in->vkind) /* (wrapped and segment-based per element) */
			return vec_accesses(in, r, a, w, used, pos, fs_base, gs_base, out);
		a = seg_addr(r->flags, a, fs_base, gs_base);
		out->acc[out->nacc++] = (struct gb_access){ a, r->size, r->flags & GB_REF_WRITE };
	}
	return 1;
}

int gb_jit__ring_next(const struct gb_jit *j, size_t *pos, uint64_t fs_base, uint64_t gs_base,
		      struct gb_jit_rec *out)
{
	return decode_at(j, gb_jit__ring_used(j), pos, fs_base, gs_base, out);
}


/* --- the stop-free mode's ring ---
 *
 * The writer (translated code, holding the lock) appends records as in the
 * other mode (and the lock's acquire writes a stretch marker: a block's
 * words, ns_ring_block, count them); a block head's budget (blocks) runs out twice per pass of the
 * ring's room counted in blocks of the largest size (NS_MAXB bytes).  Half-way it wakes the consumer
 * (futex NS_WAKE) and goes on; at the second, the blocks that still fit up to the ring's end
 * (NS_END) are counted again (blocks are mostly smaller than the largest) and, while two or more
 * do, the same again; at the end it wakes it and waits until the consumer has read everything (NS_CONSUMED, which the
 * consumer writes, is a futex word too), then starts the next pass at the
 * ring's start under a seqlock (NS_SEQ odd while HEAD and NS_BASE change).
 * A wait that times out (NS_TIMEOUT, with no wake from the consumer), or
 * gebpf gone (NS_GONE, live.c: looked at before each wait), sets
 * NS_DROPPING (gone, a block with a way on, T_WAY from its budget exit's
 * slot, leaves for its original code instead: gb_jit__ways): the records written so far stay (NS_KEPT), every later block
 * writes into a scratch area and adds its record count to NS_DROPPED, and
 * the program runs on.  The slow path is the position-independent routine
 * below, copied into the code with the data part's address at each
 * `movabs $MAGIC`; it saves the flags with lahf/seto, rax and rcx come saved
 * in the thread's area, T_BLKN holds the block's record count and T_RET its
 * head. */
#define XS(x) S_(x)
#define S_(x) #x
#define MAGIC 0x1122334455667788
_Static_assert(HEAD == 128 && BUDGET == 136 && RING == 4096, "the ring routine's offsets");
__asm__(
	".text\n"
	".globl gb_jit_ring_slow, gb_jit_ring_slow_end, gb_jit_ring_slow_flg, gb_jit_ring_slow_saved\n"
	".globl gb_jit_ring_slow_rest, gb_jit_ring_slow_sahf, gb_jit_ring_slow_way\n"
	"gb_jit_ring_slow:\n"
	"	lahf\n"
	"	seto %al\n"
	"	mov %rax, %gs:" XS(T_FLG) "\n"
	"gb_jit_ring_slow_flg:\n"
	"	mov %rdx, %gs:" XS(T_RDX) "\n"
	"	mov %rsi, %gs:" XS(T_RSI) "\n"
	"	mov %rdi, %gs:" XS(T_RDI) "\n"
	"	mov %r10, %gs:" XS(T_R10) "\n"
	"	mov %r11, %gs:" XS(T_R11) "\n"
	"gb_jit_ring_slow_saved:\n"
	"	movabs $" XS(MAGIC) ", %rdi\n"
	"	cmpb $0, " XS(NS_GONE) "(%rdi)\n"   /* gebpf gone (live.c): nobody reads */
	"	jne 11f\n"
	"	cmpq $0, " XS(NS_DROPPING) "(%rdi)\n"
	"	jne 5f\n"
	"	mov " XS(NS_NEXT) "(%rdi), %rax\n"
	"	test %rax, %rax\n"
	"	jz 2f\n"
	/* half-way: the rest of the pass, and wake the consumer */
	"	movq $0, " XS(NS_NEXT) "(%rdi)\n"
	"1:	inc %rax\n"
	"	mov %rax, 136(%rdi)\n"
	"	lock incl " XS(NS_WAKE) "(%rdi)\n"
	"	lea " XS(NS_WAKE) "(%rdi), %rdi\n"
	"	mov $1, %esi\n"            /* FUTEX_WAKE */
	"	mov $0x7fffffff, %edx\n"
	"	mov $202, %eax\n"
	"	syscall\n"
	"	jmp 9f\n"
	/* the budget ran out: blocks the size of the largest that still fit
	 * (blocks are mostly smaller); two or more: half of them now, the
	 * rest after a wake of the consumer, as at the start of a pass */
	"2:	mov " XS(NS_END) "(%rdi), %rax\n"
	"	sub 128(%rdi), %rax\n"
	"	jc 6f\n"
	"	xor %edx, %edx\n"
	"	divq " XS(NS_MAXB) "(%rdi)\n"
	"	cmp $2, %rax\n"
	"	jb 6f\n"
	"	mov %rax, %rdx\n"
	"	shr $1, %rax\n"
	"	sub %rax, %rdx\n"
	"	mov %rdx, " XS(NS_NEXT) "(%rdi)\n"
	"	jmp 1b\n"
	/* the end of the pass: wake the consumer, wait until it has read it all */
	"6:	movabs $" XS(MAGIC) ", %rdi\n"
	"	lock incl " XS(NS_WAKE) "(%rdi)\n"
	"	lea " XS(NS_WAKE) "(%rdi), %rdi\n"
	"	mov $1, %esi\n"
	"	mov $0x7fffffff, %edx\n"
	"	mov $202, %eax\n"
	"	syscall\n"
	"3:	movabs $" XS(MAGIC) ", %rdi\n"
	"	mov 128(%rdi), %rax\n"
	"	sub %rdi, %rax\n"
	"	sub $4096, %rax\n"
	"	shr $3, %rax\n"
	"	add " XS(NS_BASE) "(%rdi), %rax\n"
	"	mov " XS(NS_CONSUMED) "(%rdi), %rdx\n"
	"	cmp %rdx, %rax\n"
	"	je 4f\n"
	"	cmpb $0, " XS(NS_GONE) "(%rdi)\n"
	"	jne 11f\n"
	"	movl $1, " XS(NS_WAITING) "(%rdi)\n"
	"	lea " XS(NS_TIMEOUT) "(%rdi), %r10\n"
	"	lea " XS(NS_CONSUMED) "(%rdi), %rdi\n"
	"	xor %esi, %esi\n"          /* FUTEX_WAIT, on the low half */
	"	mov $202, %eax\n"
	"	syscall\n"
	"	cmp $-110, %rax\n"         /* -ETIMEDOUT: nobody came */
	"	jne 3b\n"
	"	movabs $" XS(MAGIC) ", %rdi\n"
	"	cmpb $0, " XS(NS_GONE) "(%rdi)\n"   /* (gone while it waited) */
	"	je 10f\n"
	/* gone: the block's original code, natively (its way: T_WAY), the
	 * lock left as it is (nothing takes it any more); without a way,
	 * dropping */
	"11:	cmpq $0, %gs:" XS(T_WAY) "\n"
	"	jne 12f\n"
	"	cmpq $0, " XS(NS_DROPPING) "(%rdi)\n"
	"	jne 5f\n"
	"10:	movabs $" XS(MAGIC) ", %rdi\n"
	"	mov 128(%rdi), %rax\n"
	"	mov %rax, " XS(NS_KEPT) "(%rdi)\n"
	"	movq $1, " XS(NS_DROPPING) "(%rdi)\n"
	"	jmp 5f\n"
	/* drained: the next pass */
	"4:	incq " XS(NS_SEQ) "(%rdi)\n"
	"	lea 4096(%rdi), %rdx\n"
	"	mov %rdx, 128(%rdi)\n"
	"	mov %rax, " XS(NS_BASE) "(%rdi)\n"
	"	incq " XS(NS_SEQ) "(%rdi)\n"
	"	movl $0, " XS(NS_WAITING) "(%rdi)\n"
	"	mov " XS(NS_HALF) "(%rdi), %rax\n"
	"	mov %rax, " XS(NS_NEXT) "(%rdi)\n"
	"	inc %rax\n"
	"	mov %rax, 136(%rdi)\n"
	"	jmp 9f\n"
	/* dropping: this block writes into the scratch area, counted */
	"5:	movabs $" XS(MAGIC) ", %rdi\n"
	"	mov %gs:" XS(T_BLKN) ", %rax\n"
	"	add %rax, " XS(NS_DROPPED) "(%rdi)\n"
	"	lea " XS(NS_SCRATCH) "(%rdi), %rdx\n"
	"	mov %rdx, 128(%rdi)\n"
	"	movq $2, 136(%rdi)\n"
	"gb_jit_ring_slow_rest:\n"
	"9:	mov %gs:" XS(T_R11) ", %r11\n"
	"	mov %gs:" XS(T_R10) ", %r10\n"
	"	mov %gs:" XS(T_RDI) ", %rdi\n"
	"	mov %gs:" XS(T_RSI) ", %rsi\n"
	"	mov %gs:" XS(T_RDX) ", %rdx\n"
	"	mov %gs:" XS(T_FLG) ", %rax\n"
	"	add $0x7f, %al\n"
	"	sahf\n"
	"gb_jit_ring_slow_sahf:\n"
	"	mov %gs:" XS(T_RCX) ", %rcx\n"
	"	mov %gs:" XS(T_RAX) ", %rax\n"
	"	jmp *%gs:" XS(T_RET) "\n"
	"gb_jit_ring_slow_way:\n"
	"12:	mov %gs:" XS(T_R11) ", %r11\n"
	"	mov %gs:" XS(T_R10) ", %r10\n"
	"	mov %gs:" XS(T_RDI) ", %rdi\n"
	"	mov %gs:" XS(T_RSI) ", %rsi\n"
	"	mov %gs:" XS(T_RDX) ", %rdx\n"
	"	mov %gs:" XS(T_FLG) ", %rax\n"
	"	add $0x7f, %al\n"
	"	sahf\n"
	"	mov %gs:" XS(T_RCX) ", %rcx\n"
	"	mov %gs:" XS(T_RAX) ", %rax\n"
	"	jmp *%gs:" XS(T_WAY) "\n"
	"gb_jit_ring_slow_end:\n");
extern const uint8_t gb_jit_ring_slow[], gb_jit_ring_slow_end[], gb_jit_ring_slow_flg[],
	gb_jit_ring_slow_saved[], gb_jit_ring_slow_rest[], gb_jit_ring_slow_sahf[],
	gb_jit_ring_slow_way[];

void ns_ring_routine(struct gb_jit *j)
{
	struct gb_emit *m = &j->em;
	size_t at = m->used, n = (size_t)(gb_jit_ring_slow_end - gb_jit_ring_slow);
	const uint64_t magic = MAGIC, base = j->m.data_addr;
	struct unit *u = jit_unit_add(j, U_NS, 0);
	if (!u)
		return;
	u->ns = GB_JIT_NS_RING;
	j->ring_slow = gb_emit_here(m);
	j->ro.slow = (uint32_t)at;
	j->ro.slow_flg = (uint32_t)(at + (size_t)(gb_jit_ring_slow_flg - gb_jit_ring_slow));
	j->ro.slow_saved = (uint32_t)(at + (size_t)(gb_jit_ring_slow_saved - gb_jit_ring_slow));
	j->ro.slow_rest = (uint32_t)(at + (size_t)(gb_jit_ring_slow_rest - gb_jit_ring_slow));
	j->ro.slow_sahf = (uint32_t)(at + (size_t)(gb_jit_ring_slow_sahf - gb_jit_ring_slow));
	j->ro.slow_way = (uint32_t)(at + (size_t)(gb_jit_ring_slow_way - gb_jit_ring_slow));
	j->ro.slow_end = (uint32_t)(at + n);
	gb_emit_raw(m, gb_jit_ring_slow, n);
	jit_unit_end(j, u);
	if (m->err)
		return;
	unsigned found = 0;
	for (size_t k = at; k + 8 <= at + n; k++)
		if (!memcmp(m->buf + k, &magic, 8)) {
			memcpy(m->buf + k, &base, 8);
			found++;
		}
	if (found != 6)
		m->err = -EINVAL;
}

void ns_budget_exit(struct gb_jit *j, uint32_t ninsns, uint64_t back, uint64_t pc)
{
	struct gb_emit *m = &j->em;
	struct unit *u = jit_unit_add(j, U_NS, pc);
	if (!u)
		return;
	u->ns = GB_JIT_NS_RING;
	gb_emit_tls_store(m, T_RAX, GB_REG_RAX);
	gb_emit_tls_store(m, T_RCX, GB_REG_RCX);
	gb_emit_mov_imm32(m, GB_REG_RAX, ninsns);
	gb_emit_tls_store(m, T_BLKN, GB_REG_RAX);
	/* mov rax, [rip+way] (the slot below): where the block goes on
	 * natively once gebpf is gone */
	size_t ld = m->used;
	gb_emit_raw(m, (const uint8_t[]){ 0x48, 0x8b, 0x05, 0, 0, 0, 0 }, 7);
	gb_emit_tls_store(m, T_WAY, GB_REG_RAX);
	gb_emit_lea_rip(m, GB_REG_RCX, back);
	gb_emit_tls_store(m, T_RET, GB_REG_RCX);
	gb_emit_jump(m, ZYDIS_MNEMONIC_JMP, j->ring_slow);
	u->o_way = (uint32_t)m->used;
	gb_emit_raw(m, (const uint8_t[8]){ 0 }, 8);
	if (!m->err) {
		int32_t d = (int32_t)(u->o_way - (ld + 7));
		memcpy(m->buf + ld + 3, &d, 4);
	}
	jit_unit_end(j, u);
}

static uint64_t ns_half(const struct gb_jit *j)
{
	uint64_t w = j->max_words ? j->max_words : BLOCK_WORDS, h = j->ring_bytes / 8 / w / 2;
	return h > 1 ? h : 2;
}

void ns_ring_block(struct gb_jit *j, uint32_t words)
{
	if (words <= j->max_words)
		return;
	j->max_words = words;
	/* this pass: no more blocks than the room left holds */
	uint64_t left = j->ring_bytes / 8 - gb_jit__ring_used(j), b = left / words;
	if (*dword(j, BUDGET) > b)
		*dword(j, BUDGET) = b ? b : 1;
	*dword(j, NS_NEXT) = 0;
	*dword(j, NS_HALF) = ns_half(j);
	*dword(j, NS_MAXB) = (uint64_t)words * 8;
}

static void ns_ring_reset(struct gb_jit *j)
{
	uint64_t half = ns_half(j);
	*dword(j, HEAD) = daddr(j, RING);
	*dword(j, BUDGET) = half;
	*dword(j, NS_HALF) = half;
	*dword(j, NS_NEXT) = half;
	*dword(j, NS_SEQ) = *dword(j, NS_BASE) = *dword(j, NS_CONSUMED) = 0;
	*dword(j, NS_WAITING) = *dword(j, NS_DROPPING) = *dword(j, NS_DROPPED) = 0;
	*dword(j, NS_KEPT) = 0;
	j->woke = 0;
	*dword(j, NS_END) = daddr(j, RING) + j->ring_bytes;
	*dword(j, NS_MAXB) = (uint64_t)(j->max_words ? j->max_words : BLOCK_WORDS) * 8;
	*dword(j, NS_TIMEOUT) = j->o.ring_timeout_ms / 1000;
	*dword(j, NS_TIMEOUT + 8) = (uint64_t)(j->o.ring_timeout_ms % 1000) * 1000000;
}

static uint64_t vload(const struct gb_jit *j, size_t off)
{
	return __atomic_load_n(dword(j, off), __ATOMIC_ACQUIRE);
}

static int poll_next(struct gb_jit *j, struct gb_jit_cursor *c, struct gb_jit_rec *out)
{
	int r = decode_at(j, c->limit, &c->pos, j->fs[c->area < GB_JIT_TLS_COUNT ? c->area : 0], 0, out);
	if (r == 1 && out->kind == GB_JIT_REC_MARK) {
		c->area = out->area;
		c->mark = c->pos;
	}
	return r;
}

bool ns_ring_ends_with_mark(const struct gb_jit *j, const struct gb_jit_cursor *c, size_t used,
			    unsigned k)
{
	size_t p = 0;
	bool mark = false;
	unsigned area = 0;
	if (!used || ((const uint64_t *)(j->m.data + RING))[used - 1] != (NS_MARK | k))
		return false; /* (a marker is one word: no decoding needed) */
	if (c && c->base == vload(j, NS_BASE) && c->pos <= used &&
	    (c->pos < used || c->mark != SIZE_MAX)) {
		p = c->pos; /* (a record boundary; at used, what it read last is known) */
		mark = p && c->mark == p;
		area = c->area;
	}
	while (p < used) {
		struct gb_jit_rec rec;
		if (decode_at(j, used, &p, 0, 0, &rec) != 1)
			return false;
		mark = rec.kind == GB_JIT_REC_MARK;
		area = rec.area;
	}
	return mark && area == k;
}

int gb_jit__ring_poll(struct gb_jit *j, struct gb_jit_cursor *c, struct gb_jit_rec *out)
{
	if (c->pos < c->limit) /* what the last look at the head showed */
		return poll_next(j, c, out);
	uint64_t s1 = vload(j, NS_SEQ);
	if (s1 & 1)
		return 0;
	uint64_t base = vload(j, NS_BASE), head = vload(j, HEAD);
	if (vload(j, NS_SEQ) != s1 || vload(j, NS_DROPPING))
		return 0;
	uint64_t lo = daddr(j, RING);
	if (head < lo || head > lo + j->ring_bytes)
		return -EINVAL;
	if (base != c->base) { /* a new pass: the writer waited for us to finish the last */
		c->base = base;
		c->pos = c->mark = 0;
	}
	c->limit = (size_t)(head - lo) / 8;
	return poll_next(j, c, out);
}

/* A writer waiting at the end of a pass goes on only once everything is
 * read: it is woken then, and after each quarter of the ring read meanwhile
 * (each wake restarts its ring_timeout_ms), not at every commit.  While it
 * waits it writes nothing: HEAD and NS_BASE are still. */
void gb_jit__ring_commit(struct gb_jit *j, const struct gb_jit_cursor *c)
{
	uint64_t done = c->base + c->pos;
	__atomic_store_n(dword(j, NS_CONSUMED), done, __ATOMIC_RELEASE);
	if (!__atomic_load_n(dword(j, NS_WAITING), __ATOMIC_ACQUIRE))
		return;
	uint64_t written = vload(j, NS_BASE) + (vload(j, HEAD) - daddr(j, RING)) / 8;
	if (done != written && done - j->woke < j->ring_bytes / 8 / 4)
		return;
	j->woke = done;
	syscall(SYS_futex, dword(j, NS_CONSUMED), FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

int gb_jit__ring_wait(struct gb_jit *j, unsigned ms)
{
	uint32_t w = (uint32_t)vload(j, NS_WAKE);
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	long r = syscall(SYS_futex, dword(j, NS_WAKE), FUTEX_WAIT, w, &ts, NULL, 0);
	return r < 0 && errno != ETIMEDOUT && errno != EAGAIN && errno != EINTR ? -errno : 0;
}

void gb_jit__ring_state(const struct gb_jit *j, struct gb_jit_ring_state *st)
{
	st->dropping = vload(j, NS_DROPPING) != 0;
	st->dropped = vload(j, NS_DROPPED);
	st->consumed = vload(j, NS_CONSUMED);
}

/* --- the waker: a thread of the consumer's process asleep on NS_WAKE ---
 *
 * The writer wakes NS_WAKE half-way through the ring's room and at the end
 * of a pass; the waker passes each wake on as a signal to the consumer's
 * thread (one that waits for that signal with a long timeout: the patch
 * trap's engine loop in sigtimedwait for SIGCHLD), so the ring is drained
 * when it fills, not only at the consumer's own ticks. */
struct gb_jit_waker {
	pthread_t th;
	struct gb_jit *j;
	pid_t pid, tid;
	int sig;
	volatile int quit;
};

static void *waker_main(void *arg)
{
	struct gb_jit_waker *w = arg;
	uint32_t *word = (uint32_t *)dword(w->j, NS_WAKE);
	uint32_t seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
	while (!w->quit) {
		struct timespec ts = { 0, 100 * 1000000L };
		syscall(SYS_futex, word, FUTEX_WAIT, seen, &ts, NULL, 0);
		uint32_t now = __atomic_load_n(word, __ATOMIC_ACQUIRE);
		if (now != seen && !w->quit)
			syscall(SYS_tgkill, w->pid, w->tid, w->sig);
		seen = now;
	}
	return NULL;
}

int gb_jit__ring_waker(struct gb_jit *j, pid_t tid, int sig)
{
	if (!j->o.nostop || j->waker)
		return -EINVAL;
	struct gb_jit_waker *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	*w = (struct gb_jit_waker){ .j = j, .pid = getpid(), .tid = tid, .sig = sig };
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* it takes no signal of the process's */
	int e = pthread_create(&w->th, NULL, waker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		free(w);
		return -e;
	}
	j->waker = w;
	return 0;
}

void gb_jit__ring_waker_stop(struct gb_jit *j)
{
	struct gb_jit_waker *w = j->waker;
	if (!w)
		return;
	w->quit = 1;
	__atomic_add_fetch((uint32_t *)dword(j, NS_WAKE), 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, dword(j, NS_WAKE), FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
	pthread_join(w->th, NULL);
	free(w);
	j->waker = NULL;
}
