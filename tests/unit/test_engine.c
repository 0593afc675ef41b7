/* The trace engine (user/trace/engine.h) against real tracees, through a
 * fake entry trap (trace/trap.h): a trap that runs nothing natively (as the
 * null trap) and records what the engine tells it (who owns the range,
 * threads exiting, the exec), so the engine's rules are seen from the
 * interface the real traps use:
 *   - the owner rule (one thread inside the range at a time);
 *   - a signal whose handler interrupts the range and returns into its
 *     middle (the owner leaves and comes back mid-range);
 *   - an exec that moves the range: the summary's start/end follow it;
 *   - a thread that dies while it owns the range.
 * The tracees are tests/progs programs, launched under ptrace (no root
 * needed: they are our children). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/parse.h"
#include "ptrace/regs.h"
#include "ptrace/tracee.h"
#include "record/jsonl.h"
#include "sym/syms.h"
#include "trace/engine.h"
#include "trace/engine_int.h"
#include "trace/range.h"
#include "trace/trap.h"
#include "pt_util.h"

#define MAXEV 8192

/* What the engine told the fake trap. */
struct fake_ev {
	char what;               /* '+' owner on, '-' owner off, 'x' exit, 'e' exec */
	pid_t tid;
	uint64_t pc;             /* '+': the owner's pc */
};

struct fake_trap {
	struct gb_trap base;
	struct gb_trace_range *range;
	struct fake_ev ev[MAXEV];
	int nev;
	ssize_t owner;           /* as the hooks saw it */
	int violations;          /* an owner on while another owns, an off of a non-owner */
	int unzeroed;            /* per-thread state not zero when first seen */
};

struct fake_thread {
	bool seen;
	int owned;               /* times it got the range */
};

static void note(struct fake_trap *f, char what, pid_t tid, uint64_t pc)
{
	if (f->nev < MAXEV)
		f->ev[f->nev++] = (struct fake_ev){ what, tid, pc };
}

static struct fake_thread *fth(struct gb_engine *e, size_t i)
{
	return eng_trap_priv(e, i);
}

static void fake_owner(struct gb_trap *t, struct gb_engine *e, size_t i, bool on)
{
	struct fake_trap *f = (struct fake_trap *)t;
	struct fake_thread *th = fth(e, i);
	struct user_regs_struct r = { 0 };
	if (!th->seen) {
		f->unzeroed += th->owned != 0;
		th->seen = true;
	}
	if (on) {
		f->violations += f->owner >= 0;
		f->owner = (ssize_t)i;
		th->owned++;
		gb_regs_get(eng_tid(e, i), &r);
	} else {
		f->violations += f->owner != (ssize_t)i;
		f->owner = -1;
	}
	note(f, on ? '+' : '-', eng_tid(e, i), r.rip);
}

static void fake_exit(struct gb_trap *t, struct gb_engine *e, size_t i)
{
	note((struct fake_trap *)t, 'x', eng_tid(e, i), 0);
}

static void fake_exec(struct gb_trap *t, struct gb_engine *e)
{
	struct fake_trap *f = (struct fake_trap *)t;
	note(f, 'e', e->t->pid, 0);
	gb_trace_range_exec(f->range, e->t->pid);
}

static const struct gb_trap_ops fake_ops = {
	.name = "fake",
	.thread_size = sizeof(struct fake_thread),
	.owner = fake_owner,
	.exec = fake_exec,
	.exit = fake_exit,
};

struct run {
	struct gb_tracee t;
	struct fake_trap trap;
	struct gb_trace_range range;
	struct gb_jsonl *out;
	int fd;
	enum gb_end why;
	int status;
	char *text;              /* the trace */
	const char *rerange_sym; /* after exec: the range is this symbol */
	int reranges;
};

static int resolve(pid_t pid, const char *sym, uint64_t *start, uint64_t *end)
{
	struct gb_range_spec spec = { .kind = GB_RANGE_SYM }, out;
	snprintf(spec.symbol, sizeof(spec.symbol), "%s", sym);
	int r = gb_sym_range_resolve(&spec, pid, &out, NULL);
	if (!r) {
		*start = out.start;
		*end = out.end;
	}
	return r;
}

static int rerange(void *ctx, pid_t pid, uint64_t *start, uint64_t *end)
{
	struct run *r = ctx;
	r->reranges++;
	return resolve(pid, r->rerange_sym, start, end);
}

/* Launch prog with args, trace symbol sym with the fake trap to its end. */
static void trace(struct run *r, const char *prog, char *const *args, const char *sym)
{
	char path[PATH_MAX];
	char *argv[8] = { path };
	pt_prog_path(prog, path, sizeof(path));
	for (int k = 0; args && args[k] && k < 6; k++)
		argv[k + 1] = args[k];
	struct gb_launch_opts lo = { .argv = argv };
	cr_assert_eq(gb_tracee_launch(&lo, &r->t), 0, "cannot launch %s", path);
	uint64_t s, e;
	cr_assert_eq(resolve(r->t.pid, sym, &s, &e), 0, "no symbol %s in %s", sym, path);
	r->fd = memfd_create("trace", MFD_CLOEXEC);
	cr_assert(r->fd >= 0);
	struct gb_jsonl_opts jo = { .exec = true, .has_start = true, .has_end = true,
				    .start = s, .end = e };
	r->out = gb_jsonl__new(r->fd, &jo);
	cr_assert(r->out);
	r->range = (struct gb_trace_range){ .has_start = true, .has_end = true, .start = s,
					    .end = e, .out = r->out, .rerange = rerange,
					    .rerange_ctx = r };
	r->trap.base.ops = &fake_ops;
	r->trap.range = &r->range;
	r->trap.owner = -1;
	struct gb_engine_opts eo = { .range = &r->range, .trap = &r->trap.base };
	struct gb_engine *eng = gb_engine__new(&r->t, &eo, r->out);
	cr_assert(eng);
	r->why = gb_engine__run(eng);
	r->status = gb_engine__exit_status(eng);
	gb_engine__free(eng);
	cr_assert_eq(gb_jsonl__finish(r->out), 0);
	gb_jsonl__free(r->out);
	off_t n = lseek(r->fd, 0, SEEK_END);
	r->text = calloc(1, (size_t)n + 1);
	cr_assert(r->text && pread(r->fd, r->text, (size_t)n, 0) == n);
	close(r->fd);
	gb_tracee_free(&r->t);
}

/* The exec lines' pcs, in order. */
static size_t exec_pcs(const char *text, uint64_t *pc, size_t max)
{
	size_t n = 0;
	for (const char *l = text; (l = strstr(l, "{\"t\":\"exec\"")); l++) {
		const char *p = strstr(l, "\"pc\":\"");
		if (n < max && p)
			pc[n] = strtoull(p + 6, NULL, 16);
		n++;
	}
	return n;
}

static const char *summary(const char *text)
{
	const char *s = strstr(text, "{\"t\":\"summary\"");
	cr_assert(s, "no summary line");
	return s;
}

static int count(const struct fake_trap *f, char what)
{
	int n = 0;
	for (int k = 0; k < f->nev; k++)
		n += f->ev[k].what == what;
	return n;
}

Test(engine, one_owner_at_a_time, .timeout = 120)
{
	static struct run r;
	/* Enough calls that the first worker is still at it when the second
	 * starts (everything is single-stepped, round-robin). */
	char *args[] = { "300", NULL };
	trace(&r, "threads", args, "traced");
	cr_assert_eq(r.why, GB_END_EXITED, "ended: %s", gb_end_name(r.why));
	cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	cr_assert_eq(r.trap.violations, 0, "two owners at once");
	cr_assert_eq(r.trap.unzeroed, 0, "a trap's per-thread state came dirty");
	/* Both workers owned the range, each call once (no syscall inside). */
	pid_t a = 0, b = 0;
	for (int k = 0; k < r.trap.nev; k++)
		if (r.trap.ev[k].what == '+') {
			if (!a)
				a = r.trap.ev[k].tid;
			else if (r.trap.ev[k].tid != a && !b)
				b = r.trap.ev[k].tid;
		}
	cr_assert(a && b, "only one thread ever owned the range (%d on, %d events, thread %d)",
		  count(&r.trap, '+'), r.trap.nev, a);
	cr_assert_eq(count(&r.trap, '+'), 600);
	cr_assert_eq(count(&r.trap, '-'), 600);
	/* Each owner got the range at the function's entry and kept it to the
	 * end of the call: an in-range stretch is one thread's alone. */
	for (int k = 0; k < r.trap.nev; k++)
		if (r.trap.ev[k].what == '+')
			cr_assert_eq(r.trap.ev[k].pc, r.range.start, "entered at 0x%llx",
				     (unsigned long long)r.trap.ev[k].pc);
	free(r.text);
}

Test(engine, signal_returns_into_the_middle, .timeout = 120)
{
	static struct run r;
	char *args[] = { "50", NULL };
	trace(&r, "pt_sigmid", args, "traced");
	cr_assert_eq(r.why, GB_END_EXITED, "ended: %s", gb_end_name(r.why));
	cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	cr_assert_eq(r.trap.violations, 0);
	/* 50 calls entered at the start; 10 handlers (every fifth call) left
	 * the range and came back after the tgkill, in its middle. */
	int at_start = 0, mid = 0;
	uint64_t mid_pc = 0;
	for (int k = 0; k < r.trap.nev; k++) {
		if (r.trap.ev[k].what != '+')
			continue;
		if (r.trap.ev[k].pc == r.range.start) {
			at_start++;
		} else {
			mid++;
			cr_assert(!mid_pc || mid_pc == r.trap.ev[k].pc, "came back at two places");
			mid_pc = r.trap.ev[k].pc;
		}
	}
	cr_assert_eq(at_start, 50);
	cr_assert_eq(mid, 10);
	cr_assert(mid_pc > r.range.start && mid_pc <= r.range.end);
	/* The handler is not in the trace; the instruction it came back to
	 * is, right after the syscall instruction (2 bytes before it). */
	static uint64_t pcs[200000];
	size_t n = exec_pcs(r.text, pcs, 200000);
	cr_assert(n <= 200000);
	int back = 0;
	for (size_t k = 0; k < n; k++) {
		cr_assert(pcs[k] >= r.range.start && pcs[k] <= r.range.end);
		if (pcs[k] == mid_pc) {
			cr_assert(k > 0 && pcs[k - 1] == mid_pc - 2, "0x%llx after 0x%llx",
				  (unsigned long long)mid_pc, (unsigned long long)pcs[k - 1]);
			back++;
		}
	}
	cr_assert_eq(back, 10);
	free(r.text);
}

Test(engine, exec_moves_the_range_and_the_summary, .timeout = 120)
{
	static struct run r;
	char *args[] = { "1", NULL };
	r.rerange_sym = "main";
	trace(&r, "exec_self", args, "traced");
	cr_assert_eq(r.why, GB_END_EXITED, "ended: %s", gb_end_name(r.why));
	cr_assert_eq(count(&r.trap, 'e'), 1);
	cr_assert_eq(r.reranges, 1);
	/* After the exec the range is the new image's main: the trace has
	 * traced's lines, then main's, and the summary names main's range. */
	cr_assert(r.range.start != 0 && !r.range.pending);
	char want[96];
	snprintf(want, sizeof(want), "\"start\":\"0x%llx\",\"end\":\"0x%llx\"}",
		 (unsigned long long)r.range.start, (unsigned long long)r.range.end);
	cr_assert(strstr(summary(r.text), want), "summary %s, want %s", summary(r.text), want);
	static uint64_t pcs[100000];
	size_t n = exec_pcs(r.text, pcs, 100000);
	cr_assert(n > 0 && n <= 100000);
	cr_assert(pcs[n - 1] >= r.range.start && pcs[n - 1] <= r.range.end,
		  "the last line is not main's");
	cr_assert(pcs[0] < r.range.start || pcs[0] > r.range.end, "the first line is main's");
	free(r.text);
}

Test(engine, owner_dies_inside, .timeout = 60)
{
	static struct run r;
	trace(&r, "exit_mid", NULL, "traced");
	cr_assert_eq(r.why, GB_END_EXITED, "ended: %s", gb_end_name(r.why));
	cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 3);
	/* It got the range, and lost it only by exiting. */
	cr_assert_eq(r.trap.nev, 3, "%d events", r.trap.nev);
	cr_assert_eq(r.trap.ev[0].what, '+');
	cr_assert_eq(r.trap.ev[1].what, '-');
	cr_assert_eq(r.trap.ev[2].what, 'x');
	cr_assert_eq(r.trap.ev[0].tid, r.trap.ev[2].tid);
	cr_assert_eq(r.trap.violations, 0);
	/* push, mov, movq, mov, mov, syscall: the exit_group is the last line. */
	cr_assert(strstr(summary(r.text), "\"insns\":6,"), "%s", summary(r.text));
	free(r.text);
}
