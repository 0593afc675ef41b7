/* The stop-free mode's miss log (gb_jit__misses): in-range targets the
 * cache had no block for, counted and logged by the translated code while
 * it goes on natively; gebpf translates them with the lock held. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <sys/mman.h>

#include "decode/decode.h"
#include "jit/jit.h"
#include "jit_util.h"

extern uint8_t ns_f[], ns_f_end[], ns_tail[];   /* test_jit_nostop.c */
extern uint8_t jt_sum[], jt_sum_end[];          /* test_jit.c */

static struct gb_jit_mem mem;
static struct gb_jit *jit;

static void teardown(void)
{
	gb_jit__free(jit);
	munmap(mem.code, GB_JIT_SIZE);
}

TestSuite(jit_miss, .fini = teardown);

static size_t insn_records(void)
{
	size_t pos = 0, n = 0;
	struct gb_jit_rec rec;
	while (gb_jit__ring_next(jit, &pos, 0, 0, &rec) == 1)
		n += rec.kind == GB_JIT_REC_INSN;
	return n;
}

Test(jit_miss, a_lookup_missing_in_the_range_is_logged_and_translated_after)
{
	mem = jit_map_near((uint64_t)ns_f);
	jit = jit_open_nostop(&mem, ns_f, ns_f_end, 200);
	uint64_t e = gb_jit__entry(jit, (uint64_t)ns_f, jit_fetch, NULL);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)ns_f, jit_fetch, NULL), 0);
	gb_jit__ring_reset(jit);
	struct gb_jit_misses ms;
	gb_jit__misses(jit, &ms, false);
	cr_assert_eq(ms.count, 0);
	for (int k = 0; k < 3; k++)
		cr_assert_eq(((long (*)(long))e)(3), 5 * 3 + 1, "native result");
	cr_assert_eq(insn_records(), 3 * 12, "each call recorded up to the missing jmp");
	cr_assert_eq(gb_jit__lock_try(jit), 1);
	gb_jit__misses(jit, &ms, true);
	cr_assert_eq(ms.count, 3);
	cr_assert_eq(ms.n, 3);
	for (int k = 0; k < 3; k++)
		cr_assert_eq(ms.pc[k], (uint64_t)ns_tail, "the jmp's target");
	cr_assert_eq(gb_jit__translate_from(jit, ms.pc[0], jit_fetch, NULL), 0);
	gb_jit__misses(jit, &ms, false);
	cr_assert_eq(ms.count, 0, "cleared");
	gb_jit__lock_release(jit);
	gb_jit__ring_reset(jit);
	cr_assert_eq(((long (*)(long))e)(3), 5 * 3 + 1);
	cr_assert_eq(insn_records(), 15, "translated now: the stretch up to its call out");
	gb_jit__misses(jit, &ms, false);
	cr_assert_eq(ms.count, 0);
}

Test(jit_miss, exits_to_untranslated_blocks_of_the_range_are_logged)
{
	mem = jit_map_near((uint64_t)jt_sum);
	jit = jit_open_nostop(&mem, jt_sum, jt_sum_end, 200);
	/* the entry's block only: its exits in the range go through stubs */
	uint64_t e = gb_jit__entry(jit, (uint64_t)jt_sum, jit_fetch, NULL);
	cr_assert_neq(e, 0);
	long n = 50;
	struct gb_jit_misses ms;
	for (int round = 0; round < 20; round++) {
		gb_jit__ring_reset(jit);
		cr_assert_eq(((long (*)(long))e)(n), 5 * n, "native result");
		cr_assert_eq(gb_jit__lock_try(jit), 1, "free after the run");
		gb_jit__misses(jit, &ms, true);
		if (!ms.count) {
			gb_jit__lock_release(jit);
			cr_assert_eq(insn_records(), 3 + 7 * (size_t)n + 2, "all translated: every record");
			cr_assert_gt(round, 0, "the first run missed");
			return;
		}
		for (size_t k = 0; k < ms.n; k++) {
			cr_assert(ms.pc[k] >= (uint64_t)jt_sum && ms.pc[k] < (uint64_t)jt_sum_end,
				  "a logged target %#lx out of the range", ms.pc[k]);
			cr_assert_eq(gb_jit__translate_from(jit, ms.pc[k], jit_fetch, NULL), 0);
		}
		gb_jit__lock_release(jit);
	}
	cr_assert_fail("still missing after 20 rounds");
}

/* Two blocks 64 KiB apart share a home slot of the lookup table (its low
 * 16 bits): the one translated second goes further along the chain, and
 * indirect calls to either hit (a range past 64 KiB, such as a Python
 * binary's hot functions, had lookups miss for ever). */
extern uint8_t ibl_f[], ibl_g[], ibl_h[], ibl_end[];
__asm__(
	".text\n"
	".globl ibl_f, ibl_g, ibl_h, ibl_end\n"
	"ibl_f:\n"
	"	push %rbx\n"
	"	lea ibl_g(%rip), %rcx\n"
	"	call *%rcx\n"
	"	mov %rax, %rdi\n"
	"	lea ibl_h(%rip), %rcx\n"
	"	call *%rcx\n"
	"	pop %rbx\n"
	"	ret\n"
	"ibl_g:\n"
	"	lea 1(%rdi), %rax\n"
	"	ret\n"
	"	.org ibl_g + 0x10000, 0xcc\n"
	"ibl_h:\n"
	"	lea (%rdi,%rdi), %rax\n"
	"	ret\n"
	"ibl_end:\n");

Test(jit_miss, lookups_of_blocks_sharing_a_table_slot_both_hit)
{
	cr_assert_eq(((uint64_t)ibl_h - (uint64_t)ibl_g), 0x10000);
	mem = jit_map_near((uint64_t)ibl_f);
	jit = jit_open_nostop(&mem, ibl_f, ibl_end, 200);
	uint64_t e = gb_jit__entry(jit, (uint64_t)ibl_f, jit_fetch, NULL);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)ibl_f, jit_fetch, NULL), 0);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)ibl_g, jit_fetch, NULL), 0);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)ibl_h, jit_fetch, NULL), 0);
	for (int k = 0; k < 3; k++) {
		gb_jit__ring_reset(jit);
		cr_assert_eq(((long (*)(long))e)(20 + k), 2 * (20 + k + 1), "native result");
		cr_assert_eq(insn_records(), 12, "every instruction recorded");
	}
	struct gb_jit_misses ms;
	gb_jit__misses(jit, &ms, false);
	cr_assert_eq(ms.count, 0, "no lookup missed (%lu, the first at %#lx)", ms.count,
		     ms.n ? ms.pc[0] : 0);
}
