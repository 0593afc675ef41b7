/* The end of a pass of the stop-free mode's ring (user/jit/ring.c) while a
 * writer waiting there is unwound again and again (user/jit/unwind.c), as
 * a program's signals do (Go's SIGURG every 10 ms to a goroutine running
 * on: docs/trace.md "A trap without stops").  A child sharing the cache
 * calls a translated function with no consumer until the ring is full and
 * it waits in the ring's slow path; this process then stops it there,
 * unwinds it and lets it go, again and again: each time it runs the rest
 * natively and comes back through the entry block, whose acquire writes
 * its stretch marker.  The ring must stay within its room (before, each
 * round left one marker more at its end, until they ran past it into the
 * lock's ticket words and the consumer found the head out of bounds:
 * "the code cache's ring holds a record gebpf did not write"). */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jit/jit.h"
#include "jit_util.h"

/* rdi + 1: a block of three records (4 ring words) and its marker */
extern uint8_t re_inc[], re_inc_end[];
__asm__(
	".text\n"
	".globl re_inc, re_inc_end\n"
	"re_inc:\n"
	"	lea 1(%rdi), %rax\n"
	"	nop\n"
	"	ret\n"
	"re_inc_end:\n");

/* the same in two blocks: the second's head (which may be the one that
 * runs out of budget) comes after the first's records, not a marker */
extern uint8_t re_inc2[], re_inc2_b[], re_inc2_end[];
__asm__(
	".text\n"
	".globl re_inc2, re_inc2_b, re_inc2_end\n"
	"re_inc2:\n"
	"	lea 1(%rdi), %rax\n"
	"	jmp re_inc2_b\n"
	"re_inc2_b:\n"
	"	nop\n"
	"	ret\n"
	"re_inc2_end:\n");

static struct gb_jit_mem mem;
static struct gb_jit *jit;

static void teardown(void)
{
	gb_jit__free(jit);
	munmap(mem.code, GB_JIT_SIZE);
}

TestSuite(jit_ring_end, .fini = teardown);

enum { CALLS = 600000, ROUNDS = 60 };

/* More calls than one pass of the ring holds: exit 0 with the native result. */
static __attribute__((noreturn)) void child(uint64_t e)
{
	uint64_t (*f)(uint64_t) = (uint64_t (*)(uint64_t))e;
	ptrace(PTRACE_TRACEME, 0, NULL, NULL);
	raise(SIGSTOP);
	uint64_t s = 0;
	for (int k = 0; k < CALLS; k++)
		s = f(s);
	_exit(s == CALLS ? 0 : 3);
}

/* Let the child run until it waits for the consumer in the ring's slow
 * path (a futex); it is left stopped there, its registers in r. */
static void until_waiting(pid_t pid, struct user_regs_struct *r)
{
	int st;
	for (int k = 0; k < 5000; k++) {
		cr_assert_eq(ptrace(PTRACE_CONT, pid, NULL, NULL), 0);
		usleep(k ? 2000 : 100);
		kill(pid, SIGSTOP);
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		cr_assert(WIFSTOPPED(st), "the child ended (status %#x)", st);
		ptrace(PTRACE_GETREGS, pid, NULL, r);
		struct gb_jit_loc loc;
		if (gb_jit__locate(jit, r->rip, &loc) == 0 && loc.ns == GB_JIT_NS_RING &&
		    r->orig_rax == 202)
			return;
	}
	cr_assert_fail("the child never waited at the ring's end");
}

/* The consumer reads what is there (without telling the writer: it goes on
 * waiting); its records, or -EINVAL for a ring past its room. */
static long read_all(struct gb_jit_cursor *c)
{
	struct gb_jit_rec rec;
	long n = 0;
	int r;
	while ((r = gb_jit__ring_poll(jit, c, &rec)) == 1)
		n++;
	return r < 0 ? r : n;
}

/* The child let go, the consumer reads on until it is done: its native
 * result, the lock free, the ring within its room to the end. */
static void read_until_done(pid_t pid, struct gb_jit_cursor *c)
{
	int st;
	cr_assert_eq(ptrace(PTRACE_CONT, pid, NULL, NULL), 0);
	pid_t w;
	while ((w = waitpid(pid, &st, WNOHANG)) == 0) {
		cr_assert_geq(read_all(c), 0);
		gb_jit__ring_commit(jit, c);
		usleep(1000);
	}
	cr_assert_eq(w, pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the native result (status %#x)", st);
	cr_assert_eq(gb_jit__lock_word(jit), 0, "the lock free");
	cr_assert_geq(read_all(c), 0);
}

static void unwound_at_the_end(const uint8_t *f, const uint8_t *f_end)
{
	mem = jit_map_near_as((uint64_t)f, true);
	jit = jit_open_nostop(&mem, f, f_end, 30000); /* (waits, no timeout) */
	uint64_t e = gb_jit__entry(jit, (uint64_t)f, jit_fetch, NULL);
	cr_assert_neq(e, 0);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)f, jit_fetch, NULL), 0);
	gb_jit__ring_reset(jit);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		child(e);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_EXITKILL);
	struct user_regs_struct r;
	struct gb_jit_cursor c = { 0 };
	until_waiting(pid, &r);
	long recs = read_all(&c);
	cr_assert_gt(recs, 1000000, "a pass of the ring read (%ld records)", recs);
	size_t full = gb_jit__ring_used(jit);
	for (int k = 0; k < ROUNDS; k++) {
		/* unwound as for a signal: the lock released, the thread at
		 * the block's original pc; the consumer's cursor handed in */
		struct gb_jit_unwound u;
		cr_assert_eq(gb_jit__unwind(jit, &r, &c, &u), 0);
		cr_assert(u.held && u.ns == GB_JIT_NS_RING);
		cr_assert_eq(u.late_recs, 0, "round %d: no instruction taken back", k);
		cr_assert_eq(ptrace(PTRACE_SETREGS, pid, NULL, &r), 0);
		until_waiting(pid, &r); /* back through the entry, at the end again */
		long n = read_all(&c);
		cr_assert_geq(n, 0, "round %d: the consumer finds the ring past its room", k);
		recs += n;
		cr_assert_leq(gb_jit__ring_used(jit), full + 1,
			      "round %d: the ring grows at its end (%zu words, %zu at the first wait)",
			      k, gb_jit__ring_used(jit), full);
	}
	/* the consumer tells the writer it has read everything (the next
	 * pass), and goes on reading until the child is done */
	read_until_done(pid, &c);
}

Test(jit_ring_end, a_writer_unwound_again_and_again_at_a_pass_end_stays_in_its_room)
{
	unwound_at_the_end(re_inc, re_inc_end);
}

Test(jit_ring_end, a_writer_unwound_with_records_in_its_stretch_stays_in_its_room)
{
	unwound_at_the_end(re_inc2, re_inc2_end);
}

/* A writer unwound in the ring's slow path after it has counted the blocks
 * that still fit (the recount near a pass's end gives half of them at once
 * and wakes the consumer: a FUTEX_WAKE, where a signal pending meanwhile
 * stops the thread), or at the head it goes back to then: the thread comes
 * back through the entry block, whose acquire writes a marker the count did
 * not make room for (it counted that head's marker, written before the
 * slow path).  Before, the stretch's own marker stayed too (it was taken
 * back only at a budget of 0), and a pass of pt_preempt (a 100 us SIGALRM)
 * ended one or two words past the ring's end: "the code cache's ring holds
 * a record gebpf did not write".
 *
 * The child runs under PTRACE_SYSCALL; at the exit of each wake of the
 * slow path in the last 3% of the pass (with something written since the
 * last one: the pass's last wake comes again after each) it is unwound as
 * for a signal there (or single-stepped to the head the slow path returns
 * to, and unwound there: HEAD_AT) and let go, until it waits for the
 * consumer at the pass's end.  The ring must then be within its room. */
enum { WAKE_AT, HEAD_AT };

static void unwound_after_the_count(const uint8_t *f, const uint8_t *f_end, const uint8_t *f_b,
				    int where)
{
	mem = jit_map_near_as((uint64_t)f, true);
	jit = jit_open_nostop(&mem, f, f_end, 30000);
	uint64_t e = gb_jit__entry(jit, (uint64_t)f, jit_fetch, NULL);
	cr_assert_neq(e, 0);
	cr_assert_eq(gb_jit__translate_from(jit, (uint64_t)f, jit_fetch, NULL), 0);
	uint64_t heads[2] = { gb_jit__block(jit, (uint64_t)f, jit_fetch, NULL),
			      f_b ? gb_jit__block(jit, (uint64_t)f_b, jit_fetch, NULL) : 0 };
	cr_assert_neq(heads[0], 0);
	gb_jit__ring_reset(jit);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		child(e);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)(PTRACE_O_EXITKILL | PTRACE_O_TRACESYSGOOD));
	const size_t near_end = gb_jit__ring_words(jit) * 97 / 100; /* (its room, not GB_JIT_RING_SIZE) */
	size_t last = 0;
	unsigned unwound = 0, at_heads = 0;
	struct gb_jit_cursor c = { 0 };
	struct user_regs_struct r;
	for (;;) {
		cr_assert_eq(ptrace(PTRACE_SYSCALL, pid, NULL, NULL), 0);
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		cr_assert(WIFSTOPPED(st) && WSTOPSIG(st) == (SIGTRAP | 0x80),
			  "a system call stop of the child (status %#x)", st);
		ptrace(PTRACE_GETREGS, pid, NULL, &r);
		struct gb_jit_loc loc;
		cr_assert_eq(gb_jit__locate(jit, r.rip, &loc), 0, "a system call of the cache's");
		cr_assert(loc.ns == GB_JIT_NS_RING && r.orig_rax == 202, "the ring's slow path");
		bool entry = (long long)r.rax == -ENOSYS;
		if (entry && r.rsi == 0 /* FUTEX_WAIT */)
			break; /* the end of the pass: the consumer awaited */
		size_t used = gb_jit__ring_used(jit);
		if (entry || r.rsi != 1 /* FUTEX_WAKE */ || used < near_end || used == last)
			continue;
		last = used;
		/* on to the head it returns to (not into the wait that follows
		 * the pass's last wake: unwound in the slow path there) */
		if (where == HEAD_AT)
			for (int k = 0; r.rip != heads[0] && r.rip != heads[1] &&
					memcmp(mem.code + (r.rip - mem.code_addr), "\x0f\x05", 2); k++) {
				cr_assert_lt(k, 100, "the slow path returns to a head");
				cr_assert_eq(ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL), 0);
				cr_assert_eq(waitpid(pid, &st, 0), pid);
				cr_assert(WIFSTOPPED(st) && WSTOPSIG(st) == SIGTRAP);
				ptrace(PTRACE_GETREGS, pid, NULL, &r);
			}
		struct gb_jit_unwound u;
		cr_assert_eq(gb_jit__unwind(jit, &r, &c, &u), 0);
		cr_assert(u.held, "it held the lock");
		cr_assert_eq(ptrace(PTRACE_SETREGS, pid, NULL, &r), 0);
		unwound++;
		at_heads += u.ns == GB_JIT_NS_NONE;
	}
	cr_assert_gt(unwound, 0, "the child was unwound after a count of the ring's room");
	/* (a pass of blocks all of one size, re_inc's, is counted exactly: its
	 * last recount may be its last wake, followed by the wait) */
	if (where == HEAD_AT && f_b)
		cr_assert_gt(at_heads, 0, "the child was unwound at a head");
	long n = read_all(&c);
	cr_assert_geq(n, 0, "the consumer finds the ring past its room (%u unwinds)", unwound);
	/* the consumer reads on until the child is done */
	read_until_done(pid, &c);
}

Test(jit_ring_end, a_writer_unwound_at_the_wake_after_a_count_stays_in_its_room)
{
	unwound_after_the_count(re_inc, re_inc_end, NULL, WAKE_AT);
}

Test(jit_ring_end, a_writer_unwound_at_the_head_after_a_count_stays_in_its_room)
{
	unwound_after_the_count(re_inc, re_inc_end, NULL, HEAD_AT);
}

Test(jit_ring_end, a_writer_with_records_unwound_at_the_wake_after_a_count_stays_in_its_room)
{
	unwound_after_the_count(re_inc2, re_inc2_end, re_inc2_b, WAKE_AT);
}

Test(jit_ring_end, a_writer_with_records_unwound_at_the_head_after_a_count_stays_in_its_room)
{
	unwound_after_the_count(re_inc2, re_inc2_end, re_inc2_b, HEAD_AT);
}
