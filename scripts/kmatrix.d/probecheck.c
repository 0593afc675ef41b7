/* The kernel matrix's probe-trap check (scripts/kmatrix.d/smoke.sh, check
 * "probe"; docs/kmatrix.md): the parts of user/probe/probetrap.h's contract
 * the trace engine relies on, on the running kernel.  It forks a child that
 * calls the functions below (each starts with one kind of instruction),
 * seizes it, probes those first instructions in its own executable, and
 * checks
 *   1. each native hit stops the child once, with signo (SIGURG), si_code
 *      SI_KERNEL, AFTER the probed instruction (next instruction or branch
 *      target), and the record's rip is the probe's address;
 *   2. single-stepping a "stepping" thread over each probe ends in one
 *      SIGTRAP stop after the instruction that is_step_artifact() accepts,
 *      and nothing else;
 *   3. with SIGURG blocked, the stops are SIGWINCH at the same places, and
 *      with every signal blocked SIGSTOP;
 *   4. memory shows the int3 and orig_bytes restores the file's byte;
 *   5. three threads of the child running the functions each stop at every
 *      probe (the process filter passes every thread, not only the main one).
 * One line per fact on stdout, "probecheck: ok ..." last; exit 0, 1 when a
 * check failed (the line says which), and the probe trap's own
 * "gebpf: warning: probe trap: ..." line with exit 1 when the kernel lacks
 * what it needs.  Built by the Makefile (.output/probecheck) with gebpf's
 * objects. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe/probetrap.h"
#include "ptrace/maps.h"
#include "ptrace/step.h"

__asm__(
	"	.text\n"
	"	.p2align 4\n"
	"pc_zone:\n"
	"	push %rbx\n"
	"	xor %ebx, %ebx\n"
	"	call pc_endbr\n	add %rax, %rbx\n"
	"	call pc_push\n	add %rax, %rbx\n"
	"	call pc_mov\n	add %rax, %rbx\n"
	"	call pc_call\n	add %rax, %rbx\n"
	"	call pc_jmp\n	add %rax, %rbx\n"
	"	call pc_nop\n	add %rax, %rbx\n"
	"	mov %rbx, %rax\n"
	"	pop %rbx\n"
	"pc_zone_end: ret\n"
	"pc_endbr: endbr64\n"
	"pc_endbr_n: mov $1, %eax\n	ret\n"
	"pc_push: push %rbp\n"
	"pc_push_n: mov $2, %eax\n	pop %rbp\n	ret\n"
	"pc_mov: mov $3, %eax\n"
	"pc_mov_n: ret\n"
	"pc_call: call pc_leaf\n"
	"	add $1, %eax\n	ret\n"
	"pc_leaf: mov $4, %eax\n	ret\n"
	"pc_jmp: jmp pc_leaf2\n"
	"	ud2\n"
	"pc_leaf2: mov $6, %eax\n	ret\n"
	"pc_nop: nop\n"
	"pc_nop_n: mov $7, %eax\n	ret\n"
	"	.globl pc_zone, pc_zone_end, pc_endbr, pc_endbr_n, pc_push, pc_push_n, pc_mov\n"
	"	.globl pc_mov_n, pc_call, pc_leaf, pc_jmp, pc_leaf2, pc_nop, pc_nop_n\n");

extern char pc_zone[], pc_zone_end[], pc_endbr[], pc_endbr_n[], pc_push[], pc_push_n[],
	pc_mov[], pc_mov_n[], pc_call[], pc_leaf[], pc_jmp[], pc_leaf2[], pc_nop[], pc_nop_n[];
long pc_zone_call(void) __asm__("pc_zone");
#define ZONE_SUM (1 + 2 + 3 + 5 + 6 + 7)

static const struct kind {
	const char *name;
	char *at, *next;
	long dsp;                /* rsp after - rsp before */
} kinds[] = {
	{ "endbr64", pc_endbr, pc_endbr_n, 0 }, { "push", pc_push, pc_push_n, -8 },
	{ "mov", pc_mov, pc_mov_n, 0 },         { "call", pc_call, pc_leaf, -8 },
	{ "jmp", pc_jmp, pc_leaf2, 0 },         { "nop", pc_nop, pc_nop_n, 0 },
};
#define NK (sizeof(kinds) / sizeof(kinds[0]))

static pid_t child = -1;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
	va_list ap;

	printf("probecheck: FAIL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (child > 0)
		kill(child, SIGKILL);
	exit(1);
}

static const struct kind *kind_at(uint64_t a)
{
	for (size_t k = 0; k < NK; k++)
		if ((uintptr_t)kinds[k].at == a)
			return &kinds[k];
	return NULL;
}

enum mode { NATIVE, STEP, BLOCKED, THREADS, BLOCKED_URG };
#define NTHREADS 3

static void *thread_zone(void *arg)
{
	(void)arg;
	return (void *)(long)(pc_zone_call() == ZONE_SUM);
}

static void child_main(int gate, enum mode m)
{
	char b;

	if (m == BLOCKED) {
		sigset_t s;
		sigfillset(&s);
		sigprocmask(SIG_BLOCK, &s, NULL);
	}
	if (m == BLOCKED_URG) {
		sigset_t u;
		sigemptyset(&u);
		sigaddset(&u, SIGURG);
		sigprocmask(SIG_BLOCK, &u, NULL);
	}
	if (read(gate, &b, 1) != 1)
		_exit(90);
	if (m == THREADS) {
		pthread_t t[NTHREADS];
		void *ok;
		int bad = 0;
		for (int i = 0; i < NTHREADS; i++)
			if (pthread_create(&t[i], NULL, thread_zone, NULL))
				_exit(91);
		for (int i = 0; i < NTHREADS; i++)
			bad += pthread_join(t[i], &ok) || !ok;
		_exit(bad);
	}
	_exit(pc_zone_call() == ZONE_SUM ? 0 : 1);
}

static struct gb_probetrap *attach(pid_t pid, bool with_kinds, bool with_zone)
{
	struct gb_maps maps = { 0 };
	struct gb_probetrap *p = gb_probetrap__new(&(struct gb_probetrap_opts){ .tgid = pid });

	if (!p) {
		kill(pid, SIGKILL);
		exit(1);   /* the warning line says why */
	}
	uint64_t offs[NK + 1];
	size_t n = 0;
	char path[sizeof(maps.v[0].path)] = "";
	if (gb_maps_read(getpid(), &maps))
		fail("cannot read /proc/self/maps");
	for (size_t k = 0; k <= NK; k++) {
		uint64_t a = k < NK ? (uintptr_t)kinds[k].at : (uintptr_t)pc_zone;
		if ((k < NK && !with_kinds) || (k == NK && !with_zone))
			continue;
		const struct gb_map *mp = gb_maps_find(&maps, a);
		if (!mp || mp->path[0] != '/' || (path[0] && strcmp(path, mp->path)))
			fail("%#lx is not in this program's mapped file", (unsigned long)a);
		snprintf(path, sizeof(path), "%s", mp->path);
		offs[n++] = a - mp->start + mp->offset;
	}
	gb_maps_free(&maps);
	/* all in one call, as the trace attaches a range's entries
	 * (user/trap/probes/probes.c): one uprobe_multi link, or a batch of
	 * perf-event uprobes */
	int err = gb_probetrap__add_many(p, path, offs, n);
	if (err)
		fail("add_many %s (%zu offsets): %s", path, n, strerror(-err));
	struct gb_probetrap_stats st;
	gb_probetrap__stats(p, &st);
	static bool said;
	if (!said)
		printf("attach: %s\n", st.multi ? "uprobe_multi links" : "perf-event uprobes");
	said = true;
	return p;
}

static void getstop(pid_t pid, siginfo_t *si, struct user_regs_struct *r)
{
	memset(si, 0, sizeof(*si));
	if (ptrace(PTRACE_GETSIGINFO, pid, 0, si) || ptrace(PTRACE_GETREGS, pid, 0, r))
		fail("GETSIGINFO/GETREGS: %s", strerror(errno));
}

/* Single-step from the stop at r until pc_zone_end; every stop must be a
 * SIGTRAP; the ones after a probed address must be step artifacts. */
static int step_zone(struct gb_probetrap *p, pid_t pid, struct user_regs_struct *r)
{
	int status, over = 0;
	siginfo_t si;

	gb_probetrap__set_stepping(p, pid, true);
	for (int n = 0; r->rip != (uintptr_t)pc_zone_end; n++) {
		uint64_t from = r->rip;
		const struct kind *k = kind_at(from);
		if (n > 200)
			fail("step: no end of the zone after 200 steps");
		if (ptrace(PTRACE_SINGLESTEP, pid, 0, 0) || waitpid(pid, &status, __WALL) != pid ||
		    !WIFSTOPPED(status) || (status >> 16))
			fail("step from %#lx: status %#x", (unsigned long)from, status);
		getstop(pid, &si, r);
		if (si.si_signo != SIGTRAP)
			fail("step from %#lx: signal %d", (unsigned long)from, si.si_signo);
		bool art = gb_probetrap__is_step_artifact(p, pid, from, SIGTRAP, &si);
		if (!k) {
			if (art)
				fail("step from unprobed %#lx taken for an artifact", (unsigned long)from);
			continue;
		}
		over++;
		if (r->rip != (uintptr_t)k->next)
			fail("step over %s: at %+ld, expected %+ld", k->name, (long)(r->rip - from),
			     (long)((uintptr_t)k->next - from));
		if (!art)
			fail("step over %s: SIGTRAP si_code %d si_pid %d is not an artifact", k->name,
			     si.si_code, si.si_pid);
		printf("step %s: one SIGTRAP si_code %d at %+ld\n", k->name, si.si_code,
		       (long)(r->rip - from));
	}
	gb_probetrap__set_stepping(p, pid, false);
	return over;
}

static void check_bytes(struct gb_probetrap *p, pid_t pid)
{
	uint8_t b[16];
	struct iovec l = { b, sizeof(b) }, rv = { pc_mov, sizeof(b) };

	if (process_vm_readv(pid, &l, 1, &rv, 1, 0) != (ssize_t)sizeof(b))
		fail("process_vm_readv: %s", strerror(errno));
	if (b[0] != 0xCC)
		fail("memory at a probe shows %#x, not the int3", b[0]);
	if (gb_probetrap__orig_bytes(p, (uintptr_t)pc_mov, b, sizeof(b)) < 1 ||
	    memcmp(b, pc_mov, sizeof(b)))
		fail("orig_bytes did not restore the file's bytes");
	printf("memory: int3 at a probe, orig_bytes restores it\n");
}

static void run(enum mode m)
{
	static const char *names[] = { "native", "step", "blocked", "threads", "blocked-urg" };
	int gate[2], status, claimed = 0, steps = 0, ntids = 0;
	pid_t tids[NTHREADS + 1], tid;
	struct user_regs_struct r;
	struct gb_probe_hit hit;
	siginfo_t si;
	char b = 'g';

	if (pipe(gate))
		fail("pipe: %s", strerror(errno));
	child = fork();
	if (child < 0)
		fail("fork: %s", strerror(errno));
	if (child == 0)
		child_main(gate[0], m);
	close(gate[0]);
	if (ptrace(PTRACE_SEIZE, child, 0, m == THREADS ? PTRACE_O_TRACECLONE : 0))
		fail("PTRACE_SEIZE: %s", strerror(errno));
	struct gb_probetrap *p = attach(child, true, m == STEP);
	if (m == NATIVE)
		check_bytes(p, child);
	if (write(gate[1], &b, 1) != 1)
		fail("gate: %s", strerror(errno));
	for (;;) {
		tid = waitpid(-1, &status, __WALL);
		if (tid <= 0)
			fail("waitpid: %s", strerror(errno));
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			if (tid == child)
				break;
			continue;
		}
		if (status >> 16) {
			ptrace(PTRACE_CONT, tid, 0, 0);
			continue;
		}
		getstop(tid, &si, &r);
		int sig = si.si_signo;
		if (!gb_probetrap__claim(p, tid, sig, &si, &hit))
			fail("%s: unclaimed stop: signal %d si_code %d at %#lx", names[m], sig,
			     si.si_code, (unsigned long)r.rip);
		claimed++;
		bool seen = false;
		for (int i = 0; i < ntids; i++)
			seen |= tids[i] == tid;
		if (!seen && ntids <= NTHREADS)
			tids[ntids++] = tid;
		if (m == STEP && hit.addr == (uintptr_t)pc_zone) {
			steps = step_zone(p, child, &r);
		} else {
			const struct kind *k = kind_at(hit.addr);
			int want = m == BLOCKED ? SIGSTOP : m == BLOCKED_URG ? SIGWINCH : SIGURG;
			if (!k || hit.regs.rip != hit.addr)
				fail("%s: hit at %#lx (rip %#lx) is no probe", names[m],
				     (unsigned long)hit.addr, (unsigned long)hit.regs.rip);
			if (sig != want || si.si_code != SI_KERNEL)
				fail("%s %s: signal %d si_code %d, expected %d SI_KERNEL", names[m],
				     k->name, sig, si.si_code, want);
			if (r.rip != (uintptr_t)k->next)
				fail("%s %s: stopped at %+ld, expected %+ld (after the instruction)",
				     names[m], k->name, (long)(r.rip - hit.addr),
				     (long)((uintptr_t)k->next - hit.addr));
			if ((long)(r.rsp - hit.regs.rsp) != k->dsp)
				fail("%s %s: rsp moved by %ld, expected %ld (another thread's record?)",
				     names[m], k->name, (long)(r.rsp - hit.regs.rsp), k->dsp);
			if (m != THREADS)
				printf("%s %s: stop %s at %+ld, record rip == probe\n", names[m],
				       k->name, m == BLOCKED ? "SIGSTOP" : m == BLOCKED_URG ? "SIGWINCH" : "SIGURG",
				       (long)(r.rip - hit.addr));
		}
		ptrace(PTRACE_CONT, tid, 0, 0);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fail("%s: the child ended with status %#x (wrong result or killed)", names[m], status);
	int want = m == STEP ? 1 : m == THREADS ? NTHREADS * (int)NK : (int)NK;
	if (claimed != want || (m == STEP && steps != (int)NK))
		fail("%s: %d claimed stops (expected %d), %d steps over probes", names[m], claimed,
		     want, steps);
	if (m == THREADS) {
		if (ntids != NTHREADS)
			fail("threads: stops of %d threads, expected %d", ntids, NTHREADS);
		printf("threads: %d threads, %d stops, each claimed with its own record\n", ntids,
		       claimed);
	}
	child = -1;
	gb_probetrap__free(p);
	close(gate[1]);
}

/* The trap flag's kernel contract (gb_step_untrap, docs/trace.md "Ending"):
 * a thread left stopped after PTRACE_SINGLESTEP by a tracer that exits
 * without detaching dies of SIGTRAP; PTRACE_INTERRUPT + PTRACE_CONT first
 * ends in an interrupt stop before any instruction, and the thread then
 * outlives its tracer.  The thread's wait status. */
static int orphaned_after_step(bool untrap)
{
	pid_t v = fork();
	if (v == 0) {
		volatile unsigned long s = 0;
		for (unsigned long k = 0; k < 30000000ul; k++)
			s += k;
		_exit(0);
	}
	pid_t tr = fork();
	if (tr == 0) {
		struct gb_stop st;
		int status;
		if (ptrace(PTRACE_SEIZE, v, 0, 0)) {
			fprintf(stderr, "untrap: PTRACE_SEIZE of %d: %s\n", v, strerror(errno));
			_exit(2);
		}
		if (ptrace(PTRACE_INTERRUPT, v, 0, 0) || waitpid(v, &status, __WALL) != v) {
			fprintf(stderr, "untrap: the interrupt of %d: %s\n", v, strerror(errno));
			_exit(5);
		}
		for (int k = 0; k < 50; k++)
			if (ptrace(PTRACE_SINGLESTEP, v, 0, 0) || waitpid(v, &status, __WALL) != v ||
			    !WIFSTOPPED(status) || WSTOPSIG(status) != SIGTRAP)
				_exit(3);
		if (untrap && (gb_step_untrap(v, &st) || st.kind != GB_STOP_INTERRUPT))
			_exit(4);
		_exit(0);
	}
	int status = 0;
	if (v < 0 || tr < 0 || waitpid(tr, &status, 0) != tr || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		kill(v, SIGKILL);
		waitpid(v, NULL, 0);
		return -1 - status; /* (the tracer's status, negative) */
	}
	waitpid(v, &status, 0);
	return status;
}

/* The same, again where the tracer itself failed (its line on stderr says
 * which call, with errno): twice more, then a failure. */
static int orphaned(bool untrap)
{
	int st = -1;
	for (int k = 0; k < 3 && st < 0; k++)
		st = orphaned_after_step(untrap);
	if (st < 0)
		fail("untrap: the tracer failed 3 times (status %#x)", -1 - st);
	return st;
}

static void untrap_check(void)
{
	int st = orphaned(false);
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGTRAP)
		fail("untrap: a thread orphaned after a step did not die of SIGTRAP (%#x)", st);
	st = orphaned(true);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		fail("untrap: a thread orphaned after gb_step_untrap died (%#x)", st);
	printf("untrap: orphaned after a step: SIGTRAP; after interrupt + cont: runs on\n");
}

/* The fork event's kernel contract (tracee.c finish_call, docs/trace.md
 * "Attach"): at a PTRACE_EVENT_FORK stop rax still holds -ENOSYS; run on
 * with PTRACE_SYSCALL, the call's exit stop holds the child's pid. */
static void fork_event_check(void)
{
	pid_t v = fork();
	if (v == 0) {
		raise(SIGSTOP);
		pid_t c = fork();
		if (c == 0)
			_exit(3);
		int st;
		_exit(c > 0 && waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 3 ? 0 : 1);
	}
	int status;
	struct user_regs_struct r;
	if (v < 0 || waitpid(v, &status, WUNTRACED) != v || ptrace(PTRACE_SEIZE, v, 0,
	    PTRACE_O_TRACEFORK | PTRACE_O_TRACESYSGOOD) || kill(v, SIGCONT))
		fail("fork event: cannot seize the child");
	unsigned long child = 0;
	long at_event = 0;
	for (;;) {
		if (waitpid(v, &status, __WALL) != v || !WIFSTOPPED(status))
			fail("fork event: the child ended (%#x) before its fork's exit stop", status);
		if (status >> 16 == PTRACE_EVENT_FORK) {
			ptrace(PTRACE_GETEVENTMSG, v, 0, &child);
			ptrace(PTRACE_GETREGS, v, 0, &r);
			at_event = (long)r.rax;
			ptrace(PTRACE_SYSCALL, v, 0, 0);
			continue;
		}
		if (child && WSTOPSIG(status) == (SIGTRAP | 0x80)) {
			ptrace(PTRACE_GETREGS, v, 0, &r);
			break;
		}
		int sig = WSTOPSIG(status);
		ptrace(PTRACE_CONT, v, 0, status >> 16 || sig == SIGTRAP || sig == SIGSTOP ||
		       sig == SIGCONT ? 0 : sig);
	}
	if (at_event != -ENOSYS || r.rax != child)
		fail("fork event: rax %ld at the event (expected -ENOSYS), %lld at the exit stop "
		     "(expected the child %lu)", at_event, (long long)r.rax, child);
	/* The child was auto-attached: let it go. */
	waitpid((pid_t)child, &status, __WALL);
	ptrace(PTRACE_DETACH, (pid_t)child, 0, 0);
	ptrace(PTRACE_DETACH, v, 0, 0);
	if (waitpid(v, &status, 0) != v || !WIFEXITED(status) || WEXITSTATUS(status))
		fail("fork event: the child ended with %#x", status);
	printf("fork event: rax -ENOSYS at the event, the child's pid at the exit stop\n");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (geteuid() != 0) {
		fprintf(stderr, "gebpf: probe trap: needs root (uprobes, BPF)\n");
		return 1;
	}
	run(NATIVE);
	run(STEP);
	run(BLOCKED);
	run(BLOCKED_URG);
	run(THREADS);
	untrap_check();
	fork_event_check();
	printf("probecheck: ok: %zu kinds stop after the instruction; steps over probes end in "
	       "one SIGTRAP; SIGURG blocked -> SIGWINCH, all blocked -> SIGSTOP; %d threads all stopped; an untrapped thread "
	       "outlives its tracer; a fork's result comes at its exit stop\n", NK, NTHREADS);
	return 0;
}
