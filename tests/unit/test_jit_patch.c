/* The patch planner (user/jit/patch.c): its reasons on decoded bytes, and
 * a function of this process patched by its plan, called the ordinary way,
 * running through the stop-free cache, then restored byte for byte. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "decode/decode.h"
#include "jit/jit.h"
#include "jit/patch.h"
#include "jit_util.h"

extern uint8_t ns_f[], ns_f_end[], ns_tail[], ns_ret_site[];   /* test_jit_nostop.c */
extern uint64_t ns_seen;

/* One entry's decision for code bytes at 0x400000 (the cache at cache),
 * with ncp known code addresses cp. */
static int why_cp(const uint8_t *b, size_t n, const uint64_t *entries, size_t nent, bool writable,
		  uint64_t cache, size_t which, const uint64_t *cp, size_t ncp)
{
	struct gb_insn in[16];
	const uint64_t base = 0x400000;
	struct gb_patch_map map = { base & ~0xfffull, (base + n + 0xfff) & ~0xfffull, writable };
	struct gb_patch_in pi = { base, base + n - 1, entries, nent, in, jit_decode_all(base, b, n, in, 16),
				  &map, 1, cache, cache + GB_JIT_CODE_SIZE, cp, ncp };
	struct gb_patch_plan pl;
	cr_assert_eq(gb_patch_plan(&pi, &pl), 0);
	cr_assert_eq(pl.n, nent);
	int w = pl.v[which].why;
	gb_patch_plan_free(&pl);
	return w;
}

static int why(const uint8_t *b, size_t n, const uint64_t *entries, size_t nent, bool writable,
	       uint64_t cache, size_t which)
{
	return why_cp(b, n, entries, nent, writable, cache, which, NULL, 0);
}

Test(jit_patch, each_entry_gets_a_decision_and_its_reason)
{
	static const uint8_t f[] = { 0x55, 0x48, 0x89, 0xe5, 0xc3 };            /* push; mov; ret */
	static const uint8_t gs[] = { 0x65, 0x48, 0x8b, 0x04, 0x25, 0, 0, 0, 0, 0xc3 }; /* mov rax, gs:[0]: gs is the cache's */
	static const uint8_t far_rip[] = { 0x8b, 0x05, 0x00, 0x00, 0x00, 0x90, 0xc3 }; /* mov eax, [rip-0x60000000] */
	const uint64_t near = 0x400000 + (256ull << 20);
	uint64_t e0[] = { 0x400000 }, e01[] = { 0x400000, 0x400001 }, e1[] = { 0x400001 },
		 e2[] = { 0x400002 };
	cr_assert_eq(why(f, 5, e0, 1, false, near, 0), GB_PATCH_OK);
	cr_assert_eq(why(f, 5, e01, 2, false, near, 0), GB_PATCH_ENTRY_INSIDE);
	cr_assert_eq(why(f, 5, e1, 1, false, near, 0), GB_PATCH_SHORT);
	cr_assert_eq(why(f, 5, e0, 1, true, near, 0), GB_PATCH_WRITABLE);
	cr_assert_eq(why(f, 5, e2, 1, false, near, 0), GB_PATCH_NOT_INSN);
	cr_assert_eq(why(f, 5, e0, 1, false, 0x400000 + (4ull << 30), 0), GB_PATCH_FAR);
	cr_assert_eq(why(gs, sizeof(gs), e0, 1, false, near, 0), GB_PATCH_CANNOT_MOVE);
	uint8_t fr[sizeof(far_rip)];
	memcpy(fr, far_rip, sizeof(fr));
	int32_t disp = -0x60000000;
	memcpy(fr + 2, &disp, 4);
	cr_assert_eq(why(fr, sizeof(fr), e0, 1, false, near, 0), GB_PATCH_OK, "in reach at +256 MiB");
	cr_assert_eq(why(fr, sizeof(fr), e0, 1, false, 0x400000 + (1500ull << 20), 0),
		     GB_PATCH_CANNOT_MOVE, "its operand out of reach of the cache at +1.5 GiB");
	cr_assert_str_eq(gb_patch_why_str(GB_PATCH_WRITABLE), "writable code");
}

Test(jit_patch, no_patch_over_an_internal_target_or_a_code_address)
{
	/* push; mov ebp, esp; L: dec ecx; jnz L; ret: L (+4) is in the
	 * entry's 5 bytes, reached only from inside the range */
	static const uint8_t loop[] = { 0x55, 0x89, 0xe5, 0x90, 0xff, 0xc9, 0x75, 0xfc, 0xc3 };
	static const uint8_t f[] = { 0x55, 0x48, 0x89, 0xe5, 0x90, 0x90, 0xc3 };
	const uint64_t near = 0x400000 + (256ull << 20);
	uint64_t e0[] = { 0x400000 }, at1[] = { 0x400001 }, at0[] = { 0x400000 }, at5[] = { 0x400005 };
	cr_assert_eq(why(loop, sizeof(loop), e0, 1, false, near, 0), GB_PATCH_TARGET_INSIDE);
	cr_assert_eq(why_cp(f, sizeof(f), e0, 1, false, near, 0, at1, 1), GB_PATCH_TARGET_INSIDE,
		     "a code address of the data at +1");
	cr_assert_eq(why_cp(f, sizeof(f), e0, 1, false, near, 0, at0, 1), GB_PATCH_OK,
		     "the entry itself may be a target");
	cr_assert_eq(why_cp(f, sizeof(f), e0, 1, false, near, 0, at5, 1), GB_PATCH_OK,
		     "past the 5 bytes");
}

/* Without gebpf a thread goes on natively from the copy of a patch's
 * instructions, and after a system call of the range: neither may leave it
 * inside the 5 bytes (docs/trace.md "Harmless without gebpf"). */
static int why_native(const uint8_t *b, size_t n, uint64_t cache)
{
	struct gb_insn in[16];
	const uint64_t base = 0x400000, e0[] = { base };
	struct gb_patch_map map = { base & ~0xfffull, (base + n + 0xfff) & ~0xfffull, false };
	struct gb_patch_in pi = { base, base + n - 1, e0, 1, in, jit_decode_all(base, b, n, in, 16),
				  &map, 1, cache, cache + GB_JIT_CODE_SIZE, NULL, 0, true };
	struct gb_patch_plan pl;
	cr_assert_eq(gb_patch_plan(&pi, &pl), 0);
	int w = pl.v[0].why;
	gb_patch_plan_free(&pl);
	return w;
}

Test(jit_patch, every_patch_has_a_way_on_without_gebpf)
{
	static const uint8_t sys_mid[] = { 0x31, 0xc0, 0x0f, 0x05, 0x90, 0xc3 };   /* xor; syscall; nop; ret */
	static const uint8_t sys_last[] = { 0x31, 0xc0, 0x90, 0x0f, 0x05, 0xc3 };  /* xor; nop; syscall; ret */
	static const uint8_t call_rsp[] = { 0xff, 0xd4, 0x90, 0x90, 0x90, 0xc3 };   /* call rsp; nops; ret */
	const uint64_t near = 0x400000 + (256ull << 20);
	cr_assert_eq(why_native(sys_mid, sizeof(sys_mid), near), GB_PATCH_SYSCALL_INSIDE,
		     "its return at +4, inside the jump");
	cr_assert_eq(why_native(sys_last, sizeof(sys_last), near), GB_PATCH_OK,
		     "its return at +5, past the jump");
	int w = why_native(call_rsp, sizeof(call_rsp), near);
	cr_assert_eq(w, GB_PATCH_NO_NATIVE, "call rsp (translated, but no relocated copy): %s",
		     gb_patch_why_str(w));
	cr_assert_str_eq(gb_patch_why_str(GB_PATCH_SYSCALL_INSIDE), "a system call returns inside its 5 bytes");
}

static struct gb_jit_mem mem;
static struct gb_jit *jit;

static void teardown(void)
{
	gb_jit__free(jit);
	munmap(mem.code, GB_JIT_SIZE);
}

Test(jit_patch, a_patched_function_called_normally_runs_through_the_cache, .fini = teardown)
{
	const uint64_t f = (uint64_t)ns_f, len = (uint64_t)(ns_f_end - ns_f);
	uint8_t saved[256];
	cr_assert_leq(len, sizeof(saved));
	memcpy(saved, ns_f, len);
	struct gb_patch_map map = jit_text_rwx(f, f + len);

	mem = jit_map_near(f);
	jit = jit_open_nostop(&mem, ns_f, ns_f_end, 200);
	struct gb_insn in[64];
	size_t nin = jit_decode_all(f, ns_f, len, in, 64);
	/* the start and the return sites after its three calls */
	uint64_t entries[] = { f, f + 9, f + 21, (uint64_t)ns_ret_site };
	struct gb_patch_in pi = { f, f + len - 1, entries, 4, in, nin, &map, 1, mem.code_addr,
				  mem.code_addr + GB_JIT_CODE_SIZE };
	struct gb_patch_plan pl;
	cr_assert_eq(gb_patch_plan(&pi, &pl), 0);
	for (size_t k = 0; k < pl.n; k++) {
		cr_assert_eq(pl.v[k].why, GB_PATCH_OK, "entry %zu: %s", k, gb_patch_why_str(pl.v[k].why));
		uint64_t e = gb_jit__entry(jit, pl.v[k].addr, jit_fetch, NULL);
		cr_assert_neq(e, 0);
		cr_assert_eq(gb_patch_set_target(&pl.v[k], e), 0);
		cr_assert_eq(memcmp(pl.v[k].orig, (void *)pl.v[k].addr, GB_PATCH_LEN), 0);
	}
	cr_assert_eq(pl.v[0].ninsns, 3, "push, mov and the call under the start's 5 bytes");
	cr_assert_eq(gb_jit__translate_from(jit, f, jit_fetch, NULL), 0);
	cr_assert_neq(gb_jit__block(jit, (uint64_t)ns_tail, jit_fetch, NULL), 0);

	for (size_t k = 0; k < pl.n; k++)
		memcpy((void *)pl.v[k].addr, pl.v[k].bytes, GB_PATCH_LEN);
	/* a thread standing at f+1 or f+4 is inside a patch: it continues at
	 * that instruction's entry block */
	uint64_t b = 0;
	cr_assert_eq(gb_patch_inside(&pl, f + 1, &b), &pl.v[0]);
	cr_assert_eq(b, f + 1);
	cr_assert_eq(gb_patch_inside(&pl, f + 4, &b), &pl.v[0]);
	cr_assert_eq(b, f + 4);
	cr_assert_null(gb_patch_inside(&pl, f, &b), "the patch's own start is not inside");
	cr_assert_null(gb_patch_inside(&pl, f + 5, &b));
	uint8_t view[256];
	memcpy(view, ns_f, len);
	cr_assert_neq(memcmp(view, saved, len), 0);
	gb_patch_unpatched(&pl, f, view, len);
	cr_assert_eq(memcmp(view, saved, len), 0, "the unpatched view is the original code");

	gb_jit__ring_reset(jit);
	ns_seen = 0;
	long (*volatile fn)(long) = (long (*)(long))ns_f;
	cr_assert_eq(fn(7), 5 * 7 + 1, "native result");
	cr_assert_eq(ns_seen, (uint64_t)ns_ret_site, "the callee saw the original return address");
	cr_assert_eq(gb_jit__lock_word(jit), 0);
	/* every instruction of the stretch, the return site's too */
	size_t pos = 0, n = 0, marks = 0;
	struct gb_jit_rec rec;
	uint64_t pcs[32];
	while (gb_jit__ring_next(jit, &pos, 0, 0, &rec) == 1 && n < 32) {
		if (rec.kind == GB_JIT_REC_MARK) {
			cr_assert_eq(rec.area, 0, "this thread's area");
			marks++;
		} else {
			pcs[n++] = rec.pc;
		}
	}
	cr_assert_eq(n, 17);
	cr_assert_eq(marks, 2, "a stretch from the entry, one from the return site's");
	cr_assert_eq(pcs[0], f);
	cr_assert_eq(pcs[15], (uint64_t)ns_ret_site, "pop");
	cr_assert_eq(pcs[16], (uint64_t)ns_ret_site + 1, "ret");
	struct gb_jit_stats st;
	gb_jit__stats(jit, &st);
	cr_assert_eq(st.entries, 4);

	for (size_t k = 0; k < pl.n; k++)
		memcpy((void *)pl.v[k].addr, pl.v[k].orig, GB_PATCH_LEN);
	cr_assert_eq(memcmp(ns_f, saved, len), 0, "unpatched: the original bytes exactly");
	gb_jit__ring_reset(jit);
	cr_assert_eq(fn(7), 5 * 7 + 1);
	cr_assert_eq(gb_jit__ring_used(jit), 0, "the original code runs natively again");
	gb_patch_plan_free(&pl);
}

/* --- the lookup's miss stop, served by a tracer --- */

#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>

Test(jit_patch, a_tracer_serves_a_lookup_miss_and_the_thread_goes_on_translated, .fini = teardown)
{
	/* The cache is shared with a child that runs ns_f; ns_tail (reached by
	 * an indirect jmp only) is not translated: the lookup's getpid stops
	 * the child, this process translates the target, enters it in the
	 * table and resumes the child at the lookup's retry. */
	const uint64_t f = (uint64_t)ns_f;
	mem = jit_map_near_as(f, true);
	jit = jit_open_nostop(&mem, ns_f, ns_f_end, 200);
	uint64_t e = gb_jit__entry(jit, f, jit_fetch, NULL);
	cr_assert_eq(gb_jit__translate_from(jit, f, jit_fetch, NULL), 0);
	gb_jit__ring_reset(jit);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		raise(SIGSTOP);
		_exit(((long (*)(long))e)(7) == 5 * 7 + 1 ? 0 : 3);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFSTOPPED(st));
	ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_TRACESYSGOOD);
	int misses = 0;
	uint64_t retry = 0;
	for (;;) {
		cr_assert_eq(ptrace(PTRACE_SYSCALL, pid, NULL, NULL), 0);
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		if (WIFEXITED(st))
			break;
		cr_assert(WIFSTOPPED(st) && WSTOPSIG(st) == (SIGTRAP | 0x80), "status %#x", st);
		struct user_regs_struct r;
		ptrace(PTRACE_GETREGS, pid, NULL, &r);
		struct gb_jit_loc loc;
		if (retry) { /* the miss's syscall-exit stop: on at the retry */
			r.rip = retry;
			ptrace(PTRACE_SETREGS, pid, NULL, &r);
			retry = 0;
			continue;
		}
		if (gb_jit__locate(jit, r.rip, &loc) || !loc.lookup_miss)
			continue;
		uint64_t t = gb_jit__lookup_target(jit, r.gs_base);
		cr_assert_eq(t, (uint64_t)ns_tail);
		cr_assert_neq(gb_jit__block(jit, t, jit_fetch, NULL), 0);
		gb_jit__table_put(jit, t);
		cr_assert_eq(gb_jit__translate_from(jit, t, jit_fetch, NULL), 0);
		retry = loc.retry;
		misses++;
	}
	cr_assert_eq(WEXITSTATUS(st), 0, "the child's result was native");
	cr_assert_eq(misses, 1);
	size_t pos = 0, n = 0;
	struct gb_jit_rec rec;
	while (gb_jit__ring_next(jit, &pos, 0, 0, &rec) == 1)
		n += rec.kind == GB_JIT_REC_INSN;
	cr_assert_eq(n, 15, "all of ns_f's records up to its call out, ns_tail's included");
	cr_assert_eq(gb_jit__lock_word(jit), 0);
}
