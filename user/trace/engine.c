/* The single-step engine: see engine.h.
 *
 * Rules the code below relies on (design.md "Engine notes"):
 * - A step's lines are committed only when the step completes (a step trap,
 *   or the exit of the process from a syscall): a signal-delivery-stop after
 *   a step means the instruction did not execute (it faulted, or a signal
 *   was already pending), and the next step delivers the signal, stopping
 *   before the handler's first instruction.
 * - Stepping `syscall` reports the trap at syscall exit.  With more than one
 *   live thread a syscall is stepped asynchronously (it may block on another
 *   thread), its lines committed when it is issued.
 * - pushf pushes TF=1: bit 8 of the pushed word is cleared after the step.
 * - cpuid is run to a breakpoint after it (a step over it may run one more
 *   instruction under KVM).
 */
#include "trace/engine.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/sigflag.h"
#include "ptrace/mem.h"
#include "ptrace/regs.h"
#include "ptrace/wait.h"
#include "trace/cpu.h"
#include "trace/icache.h"
#include "trace/progress.h"

enum tstate { T_READY, T_SYSCALL, T_GROUP, T_GONE };

struct ethread {
	int vcpu;               /* -1 until its first in-range instruction */
	enum tstate state;
};

struct gb_engine {
	struct gb_tracee *t;
	struct gb_engine_opts o;
	struct gb_jsonl *out;
	struct gb_icache *ic;
	struct ethread *et;         /* parallel to t->threads */
	size_t et_cap;
	pid_t *detached;            /* fork children we let go (their stops may come late) */
	size_t ndetached, detached_cap;
	uint32_t next_vcpu;
	uint64_t vt;
	size_t rr;
	int exit_status;
	bool exited;
	bool *snap_pc_done;
	size_t snap_vt_next;        /* snap_vts is sorted; next one to take */
	struct timespec t0;
	struct gb_progress progress;
	struct gb_engine_stats st;
	enum gb_end end;
	bool ended;
};

const char *gb_end_name(enum gb_end why)
{
	static const char *const n[] = {
		[GB_END_EXITED] = "target exited", [GB_END_MAX_INSNS] = "--max-insns reached",
		[GB_END_DURATION] = "--duration elapsed", [GB_END_SIGNAL] = "interrupted",
		[GB_END_OUTPUT] = "output failed", [GB_END_ERROR] = "internal error",
	};
	return (unsigned)why < sizeof(n) / sizeof(n[0]) ? n[why] : "?";
}

static void finish(struct gb_engine *e, enum gb_end why)
{
	if (!e->ended) {
		e->ended = true;
		e->end = why;
	}
}

static struct ethread *eth(struct gb_engine *e, size_t i)
{
	if (i >= e->et_cap) {
		size_t cap = e->et_cap ? e->et_cap : 8;
		while (cap <= i)
			cap *= 2;
		struct ethread *v = realloc(e->et, cap * sizeof(*v));
		if (!v)
			abort();
		for (size_t k = e->et_cap; k < cap; k++)
			v[k] = (struct ethread){ .vcpu = -1, .state = T_READY };
		e->et = v;
		e->et_cap = cap;
	}
	return &e->et[i];
}

static ssize_t thread_index(struct gb_engine *e, pid_t tid)
{
	for (size_t i = 0; i < e->t->nthreads; i++)
		if (e->t->threads[i].tid == tid)
			return (ssize_t)i;
	return -1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct gb_engine *gb_engine__new(struct gb_tracee *t, const struct gb_engine_opts *o,
				 struct gb_jsonl *out)
{
	struct gb_engine *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->t = t;
	e->o = *o;
	e->out = out;
	e->ic = gb_icache__new();
	e->snap_pc_done = calloc(o->nsnap_pcs + 1, sizeof(bool));
	if (o->nsnap_vts) {
		uint64_t *v = malloc(o->nsnap_vts * sizeof(*v));
		if (v) {
			memcpy(v, o->snap_vts, o->nsnap_vts * sizeof(*v));
			qsort(v, o->nsnap_vts, sizeof(*v), cmp_u64);
		}
		e->o.snap_vts = v;
	}
	if (!e->ic || !e->snap_pc_done) {
		gb_engine__free(e);
		return NULL;
	}
	for (size_t i = 0; i < t->nthreads; i++)
		eth(e, i)->state = t->threads[i].exited ? T_GONE : T_READY;
	return e;
}

void gb_engine__free(struct gb_engine *e)
{
	if (!e)
		return;
	gb_icache__free(e->ic);
	free(e->et);
	free(e->detached);
	free(e->snap_pc_done);
	free((void *)(e->o.nsnap_vts ? e->o.snap_vts : NULL));
	free(e);
}

int gb_engine__exit_status(const struct gb_engine *e) { return e->exit_status; }
uint64_t gb_engine__vt(const struct gb_engine *e) { return e->vt; }
struct gb_jsonl *gb_engine__out(struct gb_engine *e) { return e->out; }

void gb_engine__stats(const struct gb_engine *e, struct gb_engine_stats *s)
{
	*s = e->st;
	s->in_range = e->vt;
}

static inline bool in_range(const struct gb_engine *e, uint64_t pc)
{
	return (!e->o.has_start || pc >= e->o.start) && (!e->o.has_end || pc <= e->o.end);
}

static size_t live_threads(const struct gb_engine *e)
{
	size_t n = 0;
	for (size_t i = 0; i < e->t->nthreads; i++)
		n += e->et[i].state != T_GONE;
	return n;
}

static void thread_gone(struct gb_engine *e, size_t i)
{
	e->et[i].state = T_GONE;
	e->t->threads[i].exited = true;
	e->t->threads[i].stopped = false;
}

/* ---- threads created and destroyed ---------------------------------- */

static bool is_thread_of(pid_t pid, pid_t tid)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/task/%d", pid, tid);
	return stat(path, &st) == 0;
}

static bool was_detached(struct gb_engine *e, pid_t pid)
{
	for (size_t i = 0; i < e->ndetached; i++)
		if (e->detached[i] == pid)
			return true;
	return false;
}

static void remember_detached(struct gb_engine *e, pid_t pid)
{
	if (e->ndetached == e->detached_cap) {
		size_t cap = e->detached_cap ? e->detached_cap * 2 : 8;
		pid_t *v = realloc(e->detached, cap * sizeof(*v));
		if (!v)
			return;
		e->detached = v;
		e->detached_cap = cap;
	}
	e->detached[e->ndetached++] = pid;
}

/* A stop of a task we do not know yet: a new thread (keep it, stopped) or
 * a forked child (let it go, untraced). */
static void adopt_task(struct gb_engine *e, pid_t tid)
{
	if (is_thread_of(e->t->pid, tid)) {
		struct gb_thread *th = gb_tracee_add_thread(e->t, tid);
		if (!th)
			return;
		th->stopped = true;
		eth(e, (size_t)(th - e->t->threads))->state = T_READY;
		gb_tracee_pin_thread(e->t, tid);
	} else {
		ptrace(PTRACE_DETACH, tid, 0, 0);
		remember_detached(e, tid);
	}
}

/* The parent reported PTRACE_EVENT_CLONE/FORK/VFORK for new task nt. */
static void new_task(struct gb_engine *e, pid_t nt)
{
	if (thread_index(e, nt) >= 0 || was_detached(e, nt))
		return; /* its first stop was seen already */
	int status;
	while (waitpid(nt, &status, __WALL) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) || WIFSIGNALED(status))
		return;
	adopt_task(e, nt);
}

static void on_exec(struct gb_engine *e, size_t i, pid_t former)
{
	/* Every other thread is gone; the exec'ing thread now has tid == pid. */
	for (size_t k = 0; k < e->t->nthreads; k++)
		if (k != i)
			thread_gone(e, k);
	e->t->threads[i].tid = e->t->pid;
	gb_icache__clear(e->ic);
	if (e->o.rerange_cb) {
		uint64_t s = e->o.start, en = e->o.end;
		if (e->o.rerange_cb(e->o.rerange_ctx, e->t->pid, &s, &en) == 0) {
			e->o.start = s;
			e->o.end = en;
		}
	}
	(void)former;
}

/* Process exit or death of thread i. */
static void on_exit_stop(struct gb_engine *e, size_t i, const struct gb_stop *st)
{
	thread_gone(e, i);
	if (e->t->threads[i].tid == e->t->pid) {
		e->exited = true;
		e->exit_status = st->kind == GB_STOP_EXITED ? W_EXITCODE(st->code, 0) : st->sig;
		e->t->exited = true;
		e->t->exit_status = e->exit_status;
	}
}

/* An event for a thread that is running on its own (in a syscall, or new). */
static void handle_async(struct gb_engine *e, const struct gb_stop *st)
{
	ssize_t i = thread_index(e, st->tid);
	if (i < 0) {
		if (st->kind == GB_STOP_EXITED || st->kind == GB_STOP_KILLED)
			return;
		if (!was_detached(e, st->tid))
			adopt_task(e, st->tid);
		return;
	}
	struct gb_thread *th = &e->t->threads[i];
	switch (st->kind) {
	case GB_STOP_EXITED:
	case GB_STOP_KILLED:
		on_exit_stop(e, (size_t)i, st);
		return;
	case GB_STOP_STEP:
	case GB_STOP_INTERRUPT:
		th->stopped = true;
		e->et[i].state = T_READY;
		gb_icache__bump(e->ic); /* the syscall may have changed memory */
		return;
	case GB_STOP_SIGNAL:
		th->stopped = true;
		th->pending_sig = st->sig;
		e->et[i].state = T_READY;
		return;
	case GB_STOP_GROUP:
		th->stopped = false;
		e->et[i].state = T_GROUP;
		ptrace(PTRACE_LISTEN, st->tid, 0, 0);
		return;
	case GB_STOP_EVENT:
		if (st->event == PTRACE_EVENT_CLONE || st->event == PTRACE_EVENT_FORK ||
		    st->event == PTRACE_EVENT_VFORK)
			new_task(e, (pid_t)st->msg);
		else if (st->event == PTRACE_EVENT_EXEC)
			on_exec(e, (size_t)i, (pid_t)st->msg);
		/* Still in its syscall: let it finish the step. */
		ptrace(PTRACE_SINGLESTEP, th->tid, 0, 0);
		return;
	case GB_STOP_SYSCALL:
		ptrace(PTRACE_SINGLESTEP, th->tid, 0, 0);
		return;
	}
}

/* ---- one step -------------------------------------------------------- */

struct pending {
	const struct gb_insn *insn;
	uint64_t pc;
	bool in_range;
	struct gb_access acc[GB_MAX_ACCESSES];
	int nacc;
	uint64_t rflags_before;
};

static void maybe_snap(struct gb_engine *e, size_t i, uint64_t pc, bool inr)
{
	if (!e->o.snap_cb)
		return;
	bool take = false;
	for (size_t k = 0; k < e->o.nsnap_pcs; k++)
		if (!e->snap_pc_done[k] && e->o.snap_pcs[k] == pc) {
			e->snap_pc_done[k] = true;
			take = true;
		}
	while (inr && e->snap_vt_next < e->o.nsnap_vts && e->o.snap_vts[e->snap_vt_next] <= e->vt) {
		take |= e->o.snap_vts[e->snap_vt_next] == e->vt;
		e->snap_vt_next++;
	}
	if (take) {
		gb_jsonl__flush(e->out);
		if (e->o.snap_cb(e->o.snap_ctx, e->t, e->t->threads[i].tid, e->vt, pc))
			gb_warn("snapshot at vt %llu (pc 0x%llx) failed", (unsigned long long)e->vt,
				(unsigned long long)pc);
	}
}

static void commit(struct gb_engine *e, size_t i, const struct pending *p)
{
	for (int k = 0; k < p->nacc; k++)
		if (p->acc[k].write)
			gb_icache__note_write(e->ic, p->acc[k].addr, p->acc[k].size);
	if (!p->in_range)
		return;
	struct ethread *t = &e->et[i];
	if (t->vcpu < 0)
		t->vcpu = (int)e->next_vcpu++;
	gb_jsonl__exec(e->out, (uint32_t)t->vcpu, p->pc, e->vt);
	for (int k = 0; k < p->nacc; k++)
		gb_jsonl__mem(e->out, p->acc[k].write, (uint32_t)t->vcpu, p->acc[k].addr,
			      p->acc[k].size, p->pc, e->vt);
	if (e->o.faults_cb)
		e->o.faults_cb(e->o.faults_ctx, e, e->t->threads[i].tid, (uint32_t)t->vcpu, p->pc, e->vt);
	e->vt++;
}

/* After a completed step of pushf: the pushed copy of RFLAGS has TF set by
 * our stepping; clear it unless the program had TF set itself. */
static void fix_pushf(pid_t tid, const struct pending *p)
{
	struct user_regs_struct r;
	uint16_t w;
	if (p->rflags_before & 0x100 || gb_regs_get(tid, &r))
		return;
	if (gb_mem_read(tid, r.rsp, &w, 2) == 2 && (w & 0x100)) {
		w &= (uint16_t)~0x100;
		gb_mem_write(tid, r.rsp, &w, 2);
	}
}

/* Run the cpuid at p->pc to an int3 planted after it.  Returns the stop. */
static int run_over_cpuid(struct gb_engine *e, pid_t tid, const struct pending *p, struct gb_stop *st)
{
	uint64_t bp = p->pc + p->insn->len;
	uint8_t orig, cc = 0xcc;
	if (gb_mem_read(tid, bp, &orig, 1) != 1 || gb_mem_write(tid, bp, &cc, 1) != 1)
		return -EFAULT;
	ptrace(PTRACE_CONT, tid, 0, 0);
	int r = gb_wait(tid, 0, st, false);
	gb_mem_write(tid, bp, &orig, 1);
	if (r)
		return r;
	if (st->kind == GB_STOP_SIGNAL && st->sig == SIGTRAP) {
		struct user_regs_struct regs;
		if (gb_regs_get(tid, &regs) == 0 && regs.rip == bp + 1) {
			regs.rip = bp;
			gb_regs_set(tid, &regs);
			st->kind = GB_STOP_STEP;
		}
	}
	(void)e;
	return 0;
}

/* A thread stopped inside a syscall that will be restarted (seized or
 * interrupted while blocked): rip is past the syscall instruction and rax
 * holds -ERESTART*; resuming re-executes the syscall instruction. */
static bool restarting_syscall(const struct user_regs_struct *r)
{
	long rax = (long)r->rax;
	return (long)r->orig_rax >= 0 &&
	       (rax == -512 || rax == -513 || rax == -514 || rax == -516);
}

static void step_thread(struct gb_engine *e, size_t i)
{
	struct gb_thread *th = &e->t->threads[i];
	pid_t tid = th->tid;
	struct user_regs_struct regs;
	struct pending p;
	struct gb_cpu cpu;
	struct gb_vec vec;
	int err = 0;

	if (gb_regs_get(tid, &regs)) {
		/* Killed under us: its exit status arrives through waitpid. */
		th->stopped = false;
		e->et[i].state = T_SYSCALL;
		return;
	}
	p.pc = regs.rip;
	if (restarting_syscall(&regs))
		p.pc -= 2; /* the kernel rewinds to the syscall instruction on resume */
	p.in_range = in_range(e, p.pc);
	p.nacc = 0;
	p.rflags_before = regs.eflags;
	p.insn = gb_icache__get(e->ic, tid, p.pc, &err);
	if (p.in_range)
		maybe_snap(e, i, p.pc, true);
	else if (e->o.nsnap_pcs)
		maybe_snap(e, i, p.pc, false);
	if (p.insn) {
		gb_cpu_from_regs(&cpu, &regs);
		if (p.insn->flags & GB_INSN_NEEDS_VEC) {
			if (p.in_range && gb_vec_read(tid, &vec) == 0)
				cpu.vec = &vec;
			else
				gb_icache__bump(e->ic);
		}
		if (p.in_range || !(p.insn->flags & GB_INSN_NEEDS_VEC)) {
			int n = gb_insn_accesses(p.insn, &cpu, p.acc, GB_MAX_ACCESSES);
			p.nacc = n > 0 ? n : 0;
		}
	}

	int sig = th->pending_sig;
	th->pending_sig = 0;
	uint32_t fl = p.insn ? p.insn->flags : 0;
	bool is_sys = fl & GB_INSN_SYSCALL;
	struct gb_stop st;

	if (!sig && is_sys && live_threads(e) > 1) {
		/* Asynchronous: it may block until another thread acts. */
		commit(e, i, &p);
		gb_icache__bump(e->ic);
		e->st.steps++;
		th->stopped = false;
		e->et[i].state = T_SYSCALL;
		ptrace(PTRACE_SINGLESTEP, tid, 0, 0);
		return;
	}
	e->st.steps++;
	if (!sig && (fl & GB_INSN_CPUID)) {
		if (run_over_cpuid(e, tid, &p, &st))
			return;
	} else {
		ptrace(PTRACE_SINGLESTEP, tid, 0, sig);
		bool interrupted = false;
		for (;;) {
			int r = gb_wait(tid, 0, &st, !interrupted);
			if (r == -EINTR) {
				/* Ctrl-C while a syscall blocks: stop the thread now. */
				ptrace(PTRACE_INTERRUPT, tid, 0, 0);
				interrupted = true;
				continue;
			}
			if (r) {
				gb_err("trace: waiting for thread %d: %s", tid, strerror(-r));
				finish(e, GB_END_ERROR);
				return;
			}
			if (st.kind == GB_STOP_EVENT) {
				if (st.event == PTRACE_EVENT_CLONE || st.event == PTRACE_EVENT_FORK ||
				    st.event == PTRACE_EVENT_VFORK)
					new_task(e, (pid_t)st.msg);
				else if (st.event == PTRACE_EVENT_EXEC)
					on_exec(e, i, (pid_t)st.msg);
				ptrace(PTRACE_SINGLESTEP, tid, 0, 0);
				continue;
			}
			if (st.kind == GB_STOP_INTERRUPT && !interrupted) {
				ptrace(PTRACE_SINGLESTEP, tid, 0, 0);
				continue;
			}
			break;
		}
	}

	switch (st.kind) {
	case GB_STOP_STEP:
		if (!sig) {
			commit(e, i, &p);
			if (fl & GB_INSN_PUSHF)
				fix_pushf(tid, &p);
			if (is_sys)
				gb_icache__bump(e->ic);
		}
		break;
	case GB_STOP_SIGNAL:
		th->pending_sig = st.sig;
		break;
	case GB_STOP_INTERRUPT:
		break;
	case GB_STOP_GROUP:
		th->stopped = false;
		e->et[i].state = T_GROUP;
		ptrace(PTRACE_LISTEN, tid, 0, 0);
		break;
	case GB_STOP_EXITED:
	case GB_STOP_KILLED:
		/* exit/exit_group executed (a fatal signal: nothing did). */
		if (is_sys && !sig && st.kind == GB_STOP_EXITED)
			commit(e, i, &p);
		on_exit_stop(e, i, &st);
		break;
	default:
		break;
	}
}

/* ---- the loop -------------------------------------------------------- */

static double elapsed(const struct gb_engine *e)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - e->t0.tv_sec) + (double)(now.tv_nsec - e->t0.tv_nsec) / 1e9;
}

static void poll_async(struct gb_engine *e, bool block)
{
	struct gb_stop st;
	int r = gb_wait(-1, block ? 0 : WNOHANG, &st, true);
	while (r == 0) {
		handle_async(e, &st);
		r = gb_wait(-1, WNOHANG, &st, true);
	}
}

static ssize_t pick(struct gb_engine *e)
{
	size_t n = e->t->nthreads;
	for (size_t k = 0; k < n; k++) {
		size_t i = (e->rr + k) % n;
		if (e->et[i].state == T_READY) {
			e->rr = (i + 1) % n;
			return (ssize_t)i;
		}
	}
	return -1;
}

static bool any_waiting(const struct gb_engine *e)
{
	for (size_t i = 0; i < e->t->nthreads; i++)
		if (e->et[i].state == T_SYSCALL || e->et[i].state == T_GROUP)
			return true;
	return false;
}

enum gb_end gb_engine__run(struct gb_engine *e)
{
	clock_gettime(CLOCK_MONOTONIC, &e->t0);
	gb_progress_init(&e->progress);
	if (e->o.pin)
		gb_tracee_pin(e->t);
	uint64_t iter = 0;
	while (!e->ended) {
		if (gb_sigflag_stop()) {
			finish(e, GB_END_SIGNAL);
			break;
		}
		if (gb_jsonl__error(e->out)) {
			finish(e, GB_END_OUTPUT);
			break;
		}
		if (e->o.max_insns && e->vt >= e->o.max_insns) {
			finish(e, GB_END_MAX_INSNS);
			break;
		}
		if ((++iter & 255) == 0) {
			if (e->o.duration > 0 && elapsed(e) >= e->o.duration) {
				finish(e, GB_END_DURATION);
				break;
			}
			gb_progress_tick(&e->progress, e->out, e->vt);
		}
		if (any_waiting(e))
			poll_async(e, false);
		if (!live_threads(e)) {
			finish(e, GB_END_EXITED);
			break;
		}
		ssize_t i = pick(e);
		if (i < 0) {
			poll_async(e, true); /* everyone is in a syscall or stopped */
			continue;
		}
		step_thread(e, (size_t)i);
	}
	gb_progress_done(&e->progress);
	/* Leave every live thread in a ptrace-stop for the caller (detach or
	 * snapshot): threads in a syscall or group-stop are interrupted. */
	for (size_t i = 0; i < e->t->nthreads; i++) {
		if (e->et[i].state == T_SYSCALL || e->et[i].state == T_GROUP) {
			e->t->threads[i].stopped = false; /* detach interrupts and waits */
		}
	}
	return e->end;
}
