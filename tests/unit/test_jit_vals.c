/* --values in the code cache (user/jit/vals.c), run in this process: the
 * records of a translated function hold what each instruction read, wrote
 * and left in the registers it wrote, and every address of the part after
 * an instruction maps to the next one with the registers to reload. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "decode/decode.h"
#include "jit/jit.h"
#include "jit_util.h"

/* rdi: a 32-byte buffer.  mov sets rax; add reads the buffer and writes
 * rax and the flags; the store writes it back; movdqu reads 16 bytes into
 * xmm1; cmp sets CF and SF; ret (gebpf performs it: its values are
 * gebpf's, after). */
extern uint8_t jv_fn[], jv_fn_end[];
__asm__(
	".text\n"
	".globl jv_fn, jv_fn_end\n"
	"jv_fn:\n"
	"	mov $7, %eax\n"
	"	add (%rdi), %rax\n"
	"	mov %rax, 8(%rdi)\n"
	"	movdqu (%rdi), %xmm1\n"
	"	cmp $0x20, %rax\n"
	"	ret\n"
	"jv_fn_end:\n");

static struct gb_jit_mem mem;
static struct gb_jit *jit;

static void setup(void)
{
	mem = jit_map_near((uint64_t)jv_fn);
	struct gb_jit_opts o = { .values = true };
	jit = gb_jit__new_opts(&mem, (uint64_t)jv_fn, (uint64_t)jv_fn_end - 1, &o);
	cr_assert_not_null(jit);
}

static void teardown(void)
{
	gb_jit__free(jit);
	munmap(mem.code, GB_JIT_SIZE);
}

TestSuite(jit_vals, .init = setup, .fini = teardown);

static uint64_t word(const uint8_t *p, unsigned k)
{
	uint64_t v;
	memcpy(&v, p + 8 * k, 8);
	return v;
}

Test(jit_vals, records_hold_the_values_read_written_and_left_in_registers)
{
	uint64_t blk = gb_jit__block(jit, (uint64_t)jv_fn, jit_fetch, NULL);
	cr_assert_neq(blk, 0);
	gb_jit__ring_reset(jit);
	uint64_t buf[4] = { 0x10, 0, 0, 0 };
	((void (*)(uint64_t *))blk)(buf);
	cr_assert_eq(buf[1], 0x17);

	struct gb_jit_rec r[8];
	size_t pos = 0, n = 0;
	while (n < 8 && gb_jit__ring_next(jit, &pos, 0, 0, &r[n]) == 1)
		n++;
	cr_assert_eq(n, 6);
	for (size_t k = 0; k < n; k++)
		cr_assert_not_null(r[k].vals, "record %zu has no values", k);
	/* mov $7, %eax: rax */
	cr_assert(r[0].vdone);
	cr_assert_eq(word(r[0].vals, 0), 7);
	/* add: the read (0x10), rax (0x17), the flags' word: OF 0 in byte 0,
	 * lahf's SF ZF AF PF CF in byte 1 (0x17 has an even parity: PF) */
	cr_assert(r[1].vdone);
	cr_assert_eq(word(r[1].vals, 0), 0x10);
	cr_assert_eq(word(r[1].vals, 1), 0x17);
	cr_assert_eq(word(r[1].vals, 2) & 0xffff, 0x0600);
	/* the store: its value, taken after it */
	cr_assert(r[2].vdone);
	cr_assert_eq(r[2].acc[0].addr, (uint64_t)&buf[1]);
	cr_assert_eq(word(r[2].vals, 0), 0x17);
	/* movdqu: 16 bytes read (two words), xmm1 the same 16 bytes */
	cr_assert(r[3].vdone);
	cr_assert_eq(word(r[3].vals, 0), 0x10);
	cr_assert_eq(word(r[3].vals, 1), 0x17);
	cr_assert_eq(word(r[3].vals, 2), 0x10);
	cr_assert_eq(word(r[3].vals, 3), 0x17);
	/* cmp $0x20, %rax: 0x17 - 0x20 borrows (CF) and is negative (SF) */
	cr_assert(r[4].vdone);
	cr_assert_eq(word(r[4].vals, 0) & 0xffff, 0x8300);
	/* ret: the read of the return address taken before it; rsp is gebpf's */
	cr_assert(r[5].vemu);
	cr_assert(!r[5].vdone);
	cr_assert_eq(r[5].acc[0].size, 8);
	uint64_t back = word(r[5].vals, 0); /* (the test's own code: near jv_fn) */
	cr_assert(back - (uint64_t)jv_fn < (16u << 20) || (uint64_t)jv_fn - back < (16u << 20),
		  "the return address read: %#llx", (unsigned long long)back);
}

Test(jit_vals, every_address_after_an_instruction_goes_on_at_the_next_one)
{
	cr_assert_neq(gb_jit__block(jit, (uint64_t)jv_fn, jit_fetch, NULL), 0);
	struct gb_jit_loc loc;
	size_t posts = 0;
	for (uint64_t a = mem.code_addr; gb_jit__in_code(jit, a); a++) {
		cr_assert_eq(gb_jit__locate(jit, a, &loc), 0);
		cr_assert_eq(loc.restore & (1u << 7), 0, "rsp is never a scratch register");
		if (!loc.post)
			continue;
		posts++;
		cr_assert_eq(loc.unwrite, 0, "the instruction ran: its record stays");
		cr_assert(!loc.at_insn);
		cr_assert(loc.pc > (uint64_t)jv_fn && loc.pc < (uint64_t)jv_fn_end);
	}
	cr_assert_gt(posts, 0);
}
