/* The translator (user/jit), run in this process: a function is translated
 * into a code cache mapped here, the cache's block is called like the
 * function, and its records are read back.  No tracer is attached, so
 * every exit stub's getpid just returns and the stub goes on at the
 * original address: the path a program takes when gebpf is gone. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "decode/decode.h"
#include "jit/jit.h"
#include "jit_util.h"

/* sum of arr[0..n) (int32), with a rip-relative load of the table's
 * address, a jcc loop, a store of the total, and a ret (emulated at a
 * stub: here the stub runs on into the original ret). */
extern uint8_t jt_sum[], jt_sum_end[], jt_loop[];
extern int32_t jt_arr[64];
extern int64_t jt_total;
__asm__(
	".text\n"
	".globl jt_sum, jt_sum_end, jt_loop\n"
	"jt_sum:\n"
	"	lea jt_arr(%rip), %rsi\n"
	"	xor %eax, %eax\n"
	"	xor %ecx, %ecx\n"
	"jt_loop:\n"
	"	mov %rcx, %rdx\n"
	"	and $63, %edx\n"
	"	movslq (%rsi,%rdx,4), %r8\n"
	"	add %r8, %rax\n"
	"	inc %rcx\n"
	"	cmp %rdi, %rcx\n"
	"	jb jt_loop\n"
	"	mov %rax, jt_total(%rip)\n"
	"	ret\n"
	"jt_sum_end:\n"
	".data\n"
	".globl jt_arr, jt_total\n"
	".align 64\n"
	"jt_arr: .rept 64\n .long 5\n .endr\n"
	"jt_total: .quad 0\n"
	".text\n");

static struct gb_jit_mem mem;
static struct gb_jit *jit;

static void setup(void)
{
	mem = jit_map_near((uint64_t)jt_sum);
	jit = gb_jit__new(&mem, (uint64_t)jt_sum, (uint64_t)jt_sum_end - 1);
	cr_assert_not_null(jit);
}

static void teardown(void)
{
	gb_jit__free(jit);
	munmap(mem.code, GB_JIT_SIZE);
}

TestSuite(jit, .init = setup, .fini = teardown);

typedef long (*fn_t)(long);

/* What gebpf does at the stubs' stops: translate the blocks the first one
 * jumps to (the loop, the code after it), which links them in. */
static uint64_t translate_all(void)
{
	uint64_t blk = gb_jit__block(jit, (uint64_t)jt_sum, jit_fetch, NULL);
	cr_assert_neq(blk, 0);
	cr_assert_neq(gb_jit__block(jit, (uint64_t)jt_loop, jit_fetch, NULL), 0);
	cr_assert_neq(gb_jit__block(jit, (uint64_t)jt_loop + 0x15, jit_fetch, NULL), 0);
	return blk;
}

Test(jit, translated_function_gives_native_result_and_exact_records)
{
	uint64_t blk = translate_all();
	gb_jit__ring_reset(jit);
	long n = 100;
	long r = ((fn_t)blk)(n);
	cr_assert_eq(r, 5 * n);
	cr_assert_eq(jt_total, 5 * n);

	/* The records: lea, xor, xor, then per iteration 7 instructions (the
	 * movslq reading jt_arr[i & 63]), then mov (write jt_total) and ret
	 * (read of the return address). */
	size_t pos = 0;
	struct gb_jit_rec rec;
	uint64_t pcs[1024];
	size_t npc = 0, reads = 0;
	while (gb_jit__ring_next(jit, &pos, 0, 0, &rec) == 1) {
		cr_assert_lt(npc, 1024);
		pcs[npc++] = rec.pc;
		if (rec.pc == (uint64_t)jt_loop + 6) { /* the movslq */
			cr_assert_eq(rec.nacc, 1);
			cr_assert_eq(rec.acc[0].addr, (uint64_t)&jt_arr[reads % 64]);
			cr_assert_eq(rec.acc[0].size, 4);
			cr_assert(!rec.acc[0].write);
			reads++;
		}
	}
	cr_assert_eq(reads, (size_t)n);
	cr_assert_eq(npc, 3 + 7 * (size_t)n + 2);
	cr_assert_eq(pcs[0], (uint64_t)jt_sum);
	cr_assert_eq(pcs[3], (uint64_t)jt_loop);
	struct gb_jit_rec last;
	pos = 0;
	while (gb_jit__ring_next(jit, &pos, 0, 0, &rec) == 1)
		last = rec;
	cr_assert_eq(last.pc, (uint64_t)jt_sum_end - 1, "the ret's record comes last");
	cr_assert_eq(last.nacc, 1);
	cr_assert_eq(last.acc[0].size, 8);
}

Test(jit, every_cache_address_maps_to_an_original_instruction)
{
	translate_all();
	struct gb_jit_loc loc;
	size_t n = 0;
	for (uint64_t a = mem.code_addr; gb_jit__in_code(jit, a); a++, n++) {
		cr_assert_eq(gb_jit__locate(jit, a, &loc), 0, "cache address +%#llx maps to nothing",
			     (unsigned long long)(a - mem.code_addr));
		cr_assert(loc.pc >= (uint64_t)jt_sum && loc.pc <= (uint64_t)jt_sum_end,
			  "+%#llx maps to %#llx", (unsigned long long)(a - mem.code_addr),
			  (unsigned long long)loc.pc);
		cr_assert_eq(loc.restore & (1u << 7), 0, "rsp is never a scratch register");
	}
	cr_assert_gt(n, 0);
	cr_assert_neq(gb_jit__locate(jit, mem.code_addr + n, &loc), 0);
}

Test(jit, a_full_ring_leaves_for_the_original_code)
{
	/* More block entries than the ring's budget: the budget check leaves
	 * through a stub to the original loop, which finishes natively (no
	 * tracer drains the ring): the result is still right, the ring holds
	 * a prefix of the run. */
	uint64_t blk = translate_all();
	gb_jit__ring_reset(jit);
	long n = 400000;
	cr_assert_eq(((fn_t)blk)(n), 5 * n);
	size_t pos = 0, recs = 0;
	struct gb_jit_rec rec;
	while (gb_jit__ring_next(jit, &pos, 0, 0, &rec) == 1)
		recs++;
	cr_assert_gt(recs, 100000);
	cr_assert_lt(recs, 3 + 7 * (size_t)n, "the records stop where the ring was full");
	cr_assert_leq(gb_jit__ring_used(jit) * 8, (size_t)GB_JIT_RING_SIZE);
}

Test(jit, unsupported_instructions_are_not_translated)
{
	static const uint8_t rep_movsb[] = { 0xf3, 0xa4 }, syscall_[] = { 0x0f, 0x05 },
			     ud2[] = { 0x0f, 0x0b }, add[] = { 0x48, 0x01, 0xd8 },
			     call_ind[] = { 0xff, 0xd0 }, xlat[] = { 0xd7 },
			     bt_mem[] = { 0x48, 0x0f, 0xa3, 0x08 };
	struct { const uint8_t *b; size_t n; bool ok; } cases[] = {
		{ rep_movsb, 2, false }, { syscall_, 2, false }, { ud2, 2, false },
		{ xlat, 1, false }, { bt_mem, 4, false }, { add, 3, true }, { call_ind, 2, true },
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct gb_insn in;
		cr_assert_eq(gb_decode(0x1000, cases[k].b, cases[k].n, &in), 0);
		cr_assert_eq(gb_jit__supported(&in), cases[k].ok, "case %zu", k);
	}
}
