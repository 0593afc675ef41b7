/* The patch planner's 2-byte form (user/jit/patch.c, jit/patch.h): an entry
 * whose 5 bytes cannot hold a jmp rel32 (another entry at +3, as in glibc's
 * memmove whose tail mempcpy jumps into) takes a jmp rel8 to a trampoline
 * written over the nops that fall into it.  Its reasons on decoded bytes,
 * then a function of this process with that shape patched, called directly,
 * through the function before it that falls through the nops, and through
 * the trampoline itself, and restored byte for byte. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "decode/decode.h"
#include "jit/jit.h"
#include "jit/patch.h"
#include "jit_util.h"

static const uint64_t BASE = 0x400000;
#define NEAR (0x400000 + (256ull << 20))

/* The plan of code b (at BASE + npre) with the bytes pre before it (from
 * BASE, a boundary), entries e (offsets from the range's start). */
static void plan_of(const uint8_t *pre, size_t npre, const uint8_t *b, size_t n,
		    const uint64_t *e, size_t ne, const uint64_t *cp, size_t ncp,
		    struct gb_patch_plan *pl)
{
	static struct gb_insn in[64];
	static uint64_t ent[8];
	uint64_t start = BASE + npre;
	for (size_t k = 0; k < ne; k++)
		ent[k] = start + e[k];
	static struct gb_patch_map map;
	map = (struct gb_patch_map){ BASE & ~0xfffull, (start + n + 0xfff) & ~0xfffull, false };
	struct gb_patch_in pi = { start, start + n - 1, ent, ne, in, jit_decode_all(start, b, n, in, 64),
				  &map, 1, NEAR, NEAR + GB_JIT_CODE_SIZE, cp, ncp, false, BASE, pre, npre };
	cr_assert_eq(gb_patch_plan(&pi, pl), 0);
	cr_assert_eq(pl->n, ne);
}

/* ret; 11-byte nop; 6-byte nop (gas's padding) */
static const uint8_t PAD[] = { 0xc3, 0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0,
			       0x66, 0x0f, 0x1f, 0x44, 0, 0 };
/* mov rax, rdi; L: cmp rdx, 0x40; jb +0; ret (memmove's start, L mempcpy's way in) */
static const uint8_t MOVE[] = { 0x48, 0x89, 0xf8, 0x48, 0x83, 0xfa, 0x40, 0x72, 0x00, 0xc3 };

Test(jit_patch_short, memmoves_start_jumps_to_a_trampoline_in_the_nops_before_it)
{
	struct gb_patch_plan pl;
	uint64_t e[] = { 0, 3 };
	plan_of(PAD, sizeof(PAD), MOVE, sizeof(MOVE), e, 2, NULL, 0, &pl);
	const uint64_t a = BASE + sizeof(PAD);
	struct gb_patch *p = &pl.v[0];
	cr_assert_eq(p->why, GB_PATCH_OK, "%s", gb_patch_why_str(p->why));
	cr_assert_eq(p->len, GB_PATCH_SHORT_LEN);
	cr_assert_eq(p->why_other, GB_PATCH_ENTRY_INSIDE, "why not 5 bytes: %s",
		     gb_patch_why_str(p->why_other));
	cr_assert_eq(p->tramp, a - 6, "the nearest nop with 5 bytes before the entry");
	cr_assert_eq(p->ninsns, 1, "the mov alone under the 2 bytes");
	cr_assert_eq(memcmp(p->tramp_orig, PAD + 12, 5), 0);
	cr_assert_eq(memcmp(p->orig, MOVE, 2), 0);
	cr_assert_eq(pl.v[1].why, GB_PATCH_OK);
	cr_assert_eq(pl.v[1].len, GB_PATCH_LEN, "the tail's own 5 bytes: cmp and jb");

	cr_assert_eq(gb_patch_set_target(p, NEAR + 0x1000), 0);
	cr_assert_eq(p->bytes[0], 0xeb);
	cr_assert_eq((int8_t)p->bytes[1], (int8_t)(p->tramp - (a + 2)));
	cr_assert_eq(p->tramp_bytes[0], 0xe9);
	int32_t rel;
	memcpy(&rel, p->tramp_bytes + 1, 4);
	cr_assert_eq(p->tramp + 5 + (uint64_t)(int64_t)rel, NEAR + 0x1000);

	uint64_t b = 0;
	cr_assert_eq(gb_patch_inside(&pl, p->tramp + 1, &b), p, "inside the trampoline");
	cr_assert_eq(b, a, "its nops fall into the entry: it goes on there");
	cr_assert_eq(gb_patch_inside(&pl, p->tramp + 4, &b), p);
	cr_assert_null(gb_patch_inside(&pl, p->tramp, &b), "its start is a place to be");
	cr_assert_null(gb_patch_inside(&pl, p->tramp + 5, &b));
	cr_assert_eq(gb_patch_inside(&pl, a + 1, &b), p, "inside the short jump");
	cr_assert_eq(b, a);

	uint8_t view[sizeof(PAD) + sizeof(MOVE)];
	memcpy(view, PAD, sizeof(PAD));
	memcpy(view + sizeof(PAD), MOVE, sizeof(MOVE));
	memcpy(view + (p->tramp - BASE), p->tramp_bytes, 5);
	memcpy(view + sizeof(PAD), p->bytes, 2);
	gb_patch_unpatched(&pl, BASE, view, sizeof(view));
	cr_assert_eq(memcmp(view, PAD, sizeof(PAD)), 0, "the trampoline's nops back");
	cr_assert_eq(memcmp(view + sizeof(PAD), MOVE, sizeof(MOVE)), 0, "the entry's bytes back");
	gb_patch_plan_free(&pl);
}

Test(jit_patch_short, the_reasons_when_no_short_jump_fits)
{
	struct gb_patch_plan pl;
	uint64_t e[] = { 0, 3 }, e1[] = { 0, 1 };
	/* no nops before it: a ret right before the start */
	static const uint8_t ret[] = { 0xc3 };
	plan_of(ret, 1, MOVE, sizeof(MOVE), e, 2, NULL, 0, &pl);
	cr_assert_eq(pl.v[0].why, GB_PATCH_ENTRY_INSIDE);
	cr_assert_eq(pl.v[0].why_other, GB_PATCH_NO_PAD);
	cr_assert_str_eq(gb_patch_why_str(GB_PATCH_NO_PAD),
			 "no 5 bytes of nops before it, within a short jump's reach, for a trampoline");
	gb_patch_plan_free(&pl);
	/* nothing known before the range */
	plan_of(PAD, 0, MOVE, sizeof(MOVE), e, 2, NULL, 0, &pl);
	cr_assert_eq(pl.v[0].why_other, GB_PATCH_NO_PAD);
	gb_patch_plan_free(&pl);
	/* push rbx (1 byte) with an entry at +1: inside even 2 bytes */
	static const uint8_t push[] = { 0x53, 0x48, 0x89, 0xf8, 0x5b, 0xc3 };
	plan_of(PAD, sizeof(PAD), push, sizeof(push), e1, 2, NULL, 0, &pl);
	cr_assert_eq(pl.v[0].why, GB_PATCH_ENTRY_INSIDE);
	cr_assert_eq(pl.v[0].why_other, GB_PATCH_SHORT_INSIDE);
	gb_patch_plan_free(&pl);
	/* a code address inside the nearest 5 bytes of nops: the one before */
	uint64_t cp[] = { BASE + sizeof(PAD) - 4 };
	plan_of(PAD, sizeof(PAD), MOVE, sizeof(MOVE), e, 2, cp, 1, &pl);
	cr_assert_eq(pl.v[0].why, GB_PATCH_OK);
	cr_assert_eq(pl.v[0].tramp, BASE + 1, "the 11-byte nop");
	gb_patch_plan_free(&pl);
	/* nops that do not end at the start (a decode from the boundary that
	 * runs past it) are not the ones that fall into it */
	static const uint8_t over[] = { 0x0f, 0x1f, 0x44, 0, 0, 0x66, 0x0f, 0x1f, 0x44 };
	plan_of(over, sizeof(over), MOVE, sizeof(MOVE), e, 2, NULL, 0, &pl);
	cr_assert_eq(pl.v[0].why_other, GB_PATCH_NO_PAD);
	gb_patch_plan_free(&pl);
}

Test(jit_patch_short, a_label_inside_the_range_uses_the_nops_after_a_ret)
{
	/* f: xor eax, eax; add eax, 1; ret; nop5; L: mov rax, rdi; M: ret,
	 * L and M entries (M reached from outside: inside L's 5 bytes) */
	static const uint8_t f[] = { 0x31, 0xc0, 0x83, 0xc0, 0x01, 0xc3, 0x0f, 0x1f, 0x44, 0, 0,
				     0x48, 0x89, 0xf8, 0xc3, 0x90, 0x90, 0x90, 0xc3 };
	struct gb_patch_plan pl;
	uint64_t e[] = { 0, 11, 14 };
	plan_of(NULL, 0, f, sizeof(f), e, 3, NULL, 0, &pl);
	cr_assert_eq(pl.v[1].why, GB_PATCH_OK, "%s", gb_patch_why_str(pl.v[1].why));
	cr_assert_eq(pl.v[1].len, GB_PATCH_SHORT_LEN);
	cr_assert_eq(pl.v[1].tramp, BASE + 6);
	gb_patch_plan_free(&pl);
	/* ... but not over the 5 bytes of the patch at the start */
	static const uint8_t g[] = { 0x31, 0xc0, 0xc3, 0x0f, 0x1f, 0x44, 0, 0,
				     0x48, 0x89, 0xf8, 0xc3, 0x90, 0x90, 0x90, 0xc3 };
	uint64_t eg[] = { 0, 8, 11 };
	plan_of(NULL, 0, g, sizeof(g), eg, 3, NULL, 0, &pl);
	cr_assert_eq(pl.v[0].len, GB_PATCH_LEN, "[0, 5): xor, ret and the nop's first two bytes");
	cr_assert_eq(pl.v[1].why, GB_PATCH_ENTRY_INSIDE);
	cr_assert_eq(pl.v[1].why_other, GB_PATCH_NO_PAD);
	gb_patch_plan_free(&pl);
}

/* sj_chk(a, b, c, d) (d < c: -1) falls through gas's nops into sj_move(a,
 * b, c) = a + c + 1; sj_pcpy(a, b, c) = a + 100 + c + 1 jumps into its
 * tail at +3, as mempcpy into memmove. */
extern uint8_t sj_chk[], sj_chk_end[], sj_move[], sj_tail[], sj_fail[], sj_move_end[], sj_pcpy[];
__asm__(
	".text\n"
	".p2align 5\n"
	"sj_chk:\n"
	"	cmp %rdx, %rcx\n"
	"	jb sj_fail\n"
	"sj_chk_end:\n"
	".p2align 5\n"
	"sj_move:\n"
	"	mov %rdi, %rax\n"
	"sj_tail:\n"
	"	add %rdx, %rax\n"
	"	add $1, %rax\n"
	"	ret\n"
	"sj_fail:\n"
	"	mov $-1, %rax\n"
	"	ret\n"
	"sj_move_end:\n"
	"sj_pcpy:\n"
	"	lea 100(%rdi), %rax\n"
	"	jmp sj_tail\n");

static struct gb_jit_mem mem;
static struct gb_jit *jit;

static void teardown(void)
{
	gb_jit__free(jit);
	munmap(mem.code, GB_JIT_SIZE);
}

/* The pcs recorded since the last reset (marks counted in *marks). */
static size_t recorded(uint64_t *pcs, size_t max, size_t *marks)
{
	size_t pos = 0, n = 0;
	struct gb_jit_rec rec;
	*marks = 0;
	while (gb_jit__ring_next(jit, &pos, 0, 0, &rec) == 1 && n < max) {
		if (rec.kind == GB_JIT_REC_MARK)
			++*marks;
		else
			pcs[n++] = rec.pc;
	}
	gb_jit__ring_reset(jit);
	return n;
}

Test(jit_patch_short, a_patched_memmove_shape_runs_through_the_cache_every_way_in,
     .fini = teardown)
{
	const uint64_t f = (uint64_t)sj_move, len = (uint64_t)(sj_move_end - sj_move);
	const uint64_t lo = (uint64_t)sj_chk_end, npre = f - lo;
	uint8_t saved[128];
	cr_assert_leq(npre + len, sizeof(saved));
	cr_assert_geq(npre, 5, "gas's padding before sj_move (%llu bytes)", (unsigned long long)npre);
	memcpy(saved, sj_chk_end, npre + len);
	struct gb_patch_map map = jit_text_rwx(lo, f + len);

	mem = jit_map_near(f);
	jit = jit_open_nostop(&mem, sj_move, sj_move_end, 200);
	struct gb_insn in[16];
	size_t nin = jit_decode_all(f, sj_move, len, in, 16);
	uint64_t entries[] = { f, (uint64_t)sj_tail, (uint64_t)sj_fail };
	struct gb_patch_in pi = { f, f + len - 1, entries, 3, in, nin, &map, 1, mem.code_addr,
				  mem.code_addr + GB_JIT_CODE_SIZE, NULL, 0, true, lo, sj_chk_end, npre };
	struct gb_patch_plan pl;
	cr_assert_eq(gb_patch_plan(&pi, &pl), 0);
	for (size_t k = 0; k < pl.n; k++) {
		cr_assert_eq(pl.v[k].why, GB_PATCH_OK, "entry %zu: %s", k, gb_patch_why_str(pl.v[k].why));
		uint64_t e = gb_jit__entry(jit, pl.v[k].addr, jit_fetch, NULL);
		cr_assert_neq(e, 0);
		cr_assert_eq(gb_patch_set_target(&pl.v[k], e), 0);
	}
	const struct gb_patch *p = &pl.v[0];
	cr_assert_eq(p->len, GB_PATCH_SHORT_LEN, "sj_tail at +3");
	cr_assert(p->tramp >= lo && p->tramp + 5 <= f);
	cr_assert_eq(pl.v[1].len, GB_PATCH_LEN);
	cr_assert_eq(gb_jit__translate_from(jit, f, jit_fetch, NULL), 0);

	/* written as the trap writes them: the trampoline, then the jumps */
	for (size_t k = 0; k < pl.n; k++) {
		if (pl.v[k].tramp)
			memcpy((void *)pl.v[k].tramp, pl.v[k].tramp_bytes, GB_PATCH_LEN);
		memcpy((void *)pl.v[k].addr, pl.v[k].bytes, pl.v[k].len);
	}
	long (*volatile move)(long, long, long) = (long (*)(long, long, long))sj_move;
	long (*volatile chk)(long, long, long, long) = (long (*)(long, long, long, long))sj_chk;
	long (*volatile pcpy)(long, long, long) = (long (*)(long, long, long))sj_pcpy;
	long (*volatile tramp)(long, long, long) = (long (*)(long, long, long))p->tramp;
	uint64_t pcs[16];
	size_t marks, n;
	gb_jit__ring_reset(jit);

	cr_assert_eq(move(5, 0, 7), 13);
	n = recorded(pcs, 16, &marks);
	cr_assert_eq(n, 4, "mov, add, add, ret");
	cr_assert_eq(pcs[0], f);
	cr_assert_eq(pcs[1], (uint64_t)sj_tail);
	cr_assert_eq(marks, 1);

	cr_assert_eq(chk(5, 0, 7, 10), 13, "through the nops, now the trampoline");
	n = recorded(pcs, 16, &marks);
	cr_assert_eq(n, 4, "entered at sj_move: %zu records", n);
	cr_assert_eq(pcs[0], f);
	cr_assert_eq(chk(5, 0, 7, 3), -1, "sj_fail, its own entry");
	n = recorded(pcs, 16, &marks);
	cr_assert_eq(n, 2);
	cr_assert_eq(pcs[0], (uint64_t)sj_fail);

	cr_assert_eq(pcpy(5, 0, 7), 113, "into the tail");
	n = recorded(pcs, 16, &marks);
	cr_assert_eq(n, 3, "add, add, ret");
	cr_assert_eq(pcs[0], (uint64_t)sj_tail);

	cr_assert_eq(tramp(5, 0, 7), 13, "the trampoline stands for its nops");
	n = recorded(pcs, 16, &marks);
	cr_assert_eq(n, 4);
	cr_assert_eq(gb_jit__lock_word(jit), 0);

	/* taken back as the trap does: the jumps, then the trampoline */
	for (size_t k = 0; k < pl.n; k++) {
		memcpy((void *)pl.v[k].addr, pl.v[k].orig, pl.v[k].len);
		if (pl.v[k].tramp)
			memcpy((void *)pl.v[k].tramp, pl.v[k].tramp_orig, GB_PATCH_LEN);
	}
	cr_assert_eq(memcmp(sj_chk_end, saved, npre + len), 0, "the original bytes exactly");
	cr_assert_eq(move(5, 0, 7), 13);
	cr_assert_eq(chk(5, 0, 7, 10), 13);
	cr_assert_eq(tramp(5, 0, 7), 13, "a thread left at the trampoline runs the nops into it");
	cr_assert_eq(gb_jit__ring_used(jit), 0, "natively again");
	gb_patch_plan_free(&pl);
}
