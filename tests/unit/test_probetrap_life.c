/* The probe trap's lifecycle and costs (user/probe/probetrap.h): probes
 * added before the file is mapped (exec through env, dlopen), threads with
 * records queued together, SIGKILL of the tracer while probes are attached
 * (the target runs on, every uprobe and the program are gone), and the
 * cost of adding probes and of a hit.  Needs root, uprobes and BPF. */
#include <criterion/criterion.h>
#include <bpf/bpf.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe/probetrap.h"
#include "pt_util.h"

/* 512 one-byte instructions to probe (pt_nops_end is the ret). */
__asm__(
	"	.text\n"
	"	.p2align 4\n"
	"	.globl pt_nops, pt_nops_end\n"
	"pt_nops:\n"
	"	.rept 512\n"
	"	nop\n"
	"	.endr\n"
	"pt_nops_end: ret\n");
extern char pt_nops[], pt_nops_end[];
void pt_nops_call(void) __asm__("pt_nops");

/* From test_probetrap.c. */
extern char pt_mov[], pt_mov_n[], pt_call[], pt_leaf[];
long pt_zone(void);
#define ZONE_SUM 50

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* --- probes before the file is mapped ------------------------------------ */

static char exit_mid[PATH_MAX];

static void child_exec_env(void *arg)
{
	(void)arg;
	execl("/usr/bin/env", "env", exit_mid, (char *)NULL);
	_exit(99);
}

/* exit_mid is exec'd by env after the probe is added (static, no PIE:
 * runtime address = link address).  It exits 3 from inside `traced`. */
Test(probetrap_life, probe_fires_after_exec_chain)
{
	struct pt_run r;
	uint64_t off;

	pt_need();
	pt_prog_path("exit_mid", exit_mid, sizeof(exit_mid));
	if (access("/usr/bin/env", X_OK))
		cr_skip_test("no /usr/bin/env");
	pt_run_init(&r);
	off = pt_elf_sym_off(exit_mid, "traced");
	pt_probe_file(&r, exit_mid, off);
	pt_run(&r, child_exec_env, NULL);
	cr_assert_eq(r.exit_code, 3, "exit %d", r.exit_code);
	cr_assert_eq(r.nstops, 1, "%d stops", r.nstops);
	cr_assert(r.stops[0].claimed);
	/* traced: push %rbp (1 byte) at its link address */
	cr_assert_eq(r.stops[0].regs.rip, r.stops[0].hit.addr + 1);
	cr_assert_eq(r.stops[0].regs.rsp, r.stops[0].hit.regs.rsp - 8);
}

static char libfoo[PATH_MAX];

static void child_dlopen(void *arg)
{
	long slot[8] = { 0 };
	(void)arg;
	void *h = dlopen(libfoo, RTLD_NOW);
	if (!h)
		_exit(98);
	long (*f)(long *, long) = (long (*)(long *, long))dlsym(h, "foo_hot");
	if (!f)
		_exit(97);
	long v = f(slot, 3) + f(slot, 4);
	_exit(v == 3 + 4 ? 0 : 1);
}

/* At the stop the module is new to the trap: orig_bytes finds it. */
static void dl_on_claim(struct pt_run *r, pid_t tid, struct pt_stop *s)
{
	uint8_t b[4];
	struct iovec l = { b, sizeof(b) }, rv = { (void *)(uintptr_t)s->hit.addr, sizeof(b) };
	uint8_t *want = r->ctx;

	cr_assert_eq(process_vm_readv(tid, &l, 1, &rv, 1, 0), (ssize_t)sizeof(b));
	cr_assert_eq(b[0], 0xCC);
	cr_assert_eq(gb_probetrap__orig_bytes(r->trap, s->hit.addr, b, sizeof(b)), 1);
	cr_assert(!memcmp(b, want, sizeof(b)), "orig bytes differ from the file's");
}

Test(probetrap_life, probe_fires_in_library_dlopened_later)
{
	uint8_t want[4];
	struct pt_run r;
	uint64_t off;
	FILE *f;

	pt_need();
	pt_prog_path("lib/libtrapfoo.so", libfoo, sizeof(libfoo));
	pt_run_init(&r);
	off = pt_elf_sym_off(libfoo, "foo_hot");
	f = fopen(libfoo, "rb");
	cr_assert(f && fseek(f, (long)off, SEEK_SET) == 0 && fread(want, 1, 4, f) == 4);
	fclose(f);
	pt_probe_file(&r, libfoo, off);
	r.ctx = want;
	r.on_claim = dl_on_claim;
	pt_run(&r, child_dlopen, NULL);
	cr_assert_eq(r.exit_code, 0, "exit %d", r.exit_code);
	cr_assert_eq(r.nstops, 2, "%d stops", r.nstops);
	cr_assert(r.stops[0].claimed && r.stops[1].claimed);
	cr_assert_eq(r.stops[0].hit.addr, r.stops[1].hit.addr);
	cr_assert_eq(r.stops[0].hit.addr & 0xfff, off & 0xfff);
	cr_assert_eq(r.stops[1].hit.regs.rsi, 4);   /* the second call's argument */
}

/* --- threads ------------------------------------------------------------- */

#define NTHREADS 4
#define ROUNDS 5

static void *thread_zone(void *arg)
{
	long ok = 1;
	(void)arg;
	for (int i = 0; i < ROUNDS; i++)
		ok &= pt_zone() == ZONE_SUM;
	return (void *)ok;
}

static void child_threads(void *arg)
{
	pthread_t t[NTHREADS];
	void *ok;
	int bad = 0;

	(void)arg;
	for (int i = 0; i < NTHREADS; i++)
		if (pthread_create(&t[i], NULL, thread_zone, NULL))
			_exit(20);
	for (int i = 0; i < NTHREADS; i++)
		bad += pthread_join(t[i], &ok) || !ok;
	_exit(bad);
}

/* Four threads hit the same probes concurrently: every stop is claimed
 * with its own thread's record (the stop follows that thread's hit). */
Test(probetrap_life, concurrent_threads_each_get_their_record)
{
	struct pt_run r;
	int claimed = 0;

	pt_need();
	pt_run_init(&r);
	r.ptrace_opts = PTRACE_O_TRACECLONE;
	pt_probe_self(&r, (uintptr_t)pt_mov);
	pt_probe_self(&r, (uintptr_t)pt_call);
	pt_run(&r, child_threads, NULL);
	cr_assert_eq(r.exit_code, 0, "exit %d", r.exit_code);
	for (int i = 0; i < r.nstops; i++) {
		const struct pt_stop *s = &r.stops[i];
		if (!s->claimed)
			continue;
		claimed++;
		if (s->hit.addr == (uintptr_t)pt_mov)
			cr_assert_eq(s->regs.rip, (uintptr_t)pt_mov_n);
		else
			cr_assert_eq(s->regs.rip, (uintptr_t)pt_leaf);
		cr_assert_eq(s->hit.regs.rsp - (s->hit.addr == (uintptr_t)pt_call ? 8 : 0),
			     s->regs.rsp, "thread %d: rsp of another thread's record", s->tid);
	}
	cr_assert_eq(claimed, NTHREADS * ROUNDS * 2);
	cr_assert_eq(r.stats.signals, (uint64_t)claimed);
}

/* --- SIGKILL of the tracer ------------------------------------------------ */

#define KILL_ITERS 200000
#define KILL_EXTRA 16

/* the two probes of the kill tests: pt_mov and pt_call */
#define KILL_NPROBES 2

/* The tracer of the kill test, in its own process: seize, probe, report
 * the program id on `rep`, then claim stops forever. */
static void tracer_main(const struct pt_run *pr, pid_t target, int rep, long kill_after)
{
	struct gb_probetrap *p;
	struct gb_probetrap_stats st;
	struct gb_probe_hit hit;
	int status;

	if (ptrace(PTRACE_SEIZE, target, 0, 0))
		_exit(30);
	p = gb_probetrap__new(&(struct gb_probetrap_opts){ .tgid = target });
	if (!p)
		_exit(31);
	uint64_t offs[PT_MAXPROBES];
	for (int i = 0; i < pr->nprobes; i++)
		offs[i] = pr->probe[i].off;   /* all in this test binary */
	if (gb_probetrap__add_many(p, pr->probe[0].path, offs, (size_t)pr->nprobes))
		_exit(32);
	gb_probetrap__stats(p, &st);
	if (write(rep, &st.prog_id, sizeof(st.prog_id)) != sizeof(st.prog_id))
		_exit(33);
	for (long n = 1;; n++) {
		siginfo_t si;
		if (waitpid(target, &status, __WALL) != target || !WIFSTOPPED(status))
			_exit(34);
		int sig = (status >> 16) ? 0 : WSTOPSIG(status);
		if (sig && ptrace(PTRACE_GETSIGINFO, target, 0, &si) == 0 &&
		    gb_probetrap__claim(p, target, sig, &si, &hit))
			sig = 0;
		ptrace(PTRACE_CONT, target, 0, sig);
		if (n == kill_after && write(rep, "h", 1) != 1)
			_exit(35);
	}
}

static void target_main(int gate)
{
	char b;
	long sum = 0;

	if (read(gate, &b, 1) != 1)
		_exit(90);
	for (long i = 0; i < KILL_ITERS; i++)
		sum += pt_zone();
	_exit(sum == (long)KILL_ITERS * ZONE_SUM ? 0 : 1);
}

static bool int3_at(pid_t pid, const struct pt_run *r)
{
	uint8_t b;
	for (int i = 0; i < KILL_NPROBES; i++) {
		void *a = i ? (void *)pt_call : (void *)pt_mov;
		struct iovec l = { &b, 1 }, rv = { a, 1 };
		cr_assert_eq(process_vm_readv(pid, &l, 1, &rv, 1, 0), 1);
		if (b == 0xCC)
			return true;
	}
	(void)r;
	return false;
}

/* Part e: SIGKILL the tracer while the target runs through probes. */
static void sigkill_tracer(long kill_after, bool quiet)
{
	struct pt_run r;
	int gate[2], rep[2], status;
	uint32_t prog_id = 0;
	char b = 'g';

	pt_need();
	pt_run_init(&r);
	pt_probe_self(&r, (uintptr_t)pt_mov);
	pt_probe_self(&r, (uintptr_t)pt_call);
	/* More probes make the dying tracer's exit slow (each uprobe's
	 * removal waits for grace periods): the target keeps hitting the two
	 * live ones meanwhile. */
	for (int i = 0; i < KILL_EXTRA; i++)
		pt_probe_self(&r, (uintptr_t)pt_nops + (uintptr_t)i);
	cr_assert(pipe(gate) == 0 && pipe(rep) == 0);
	pid_t t = fork();
	cr_assert(t >= 0);
	if (t == 0)
		target_main(gate[0]);
	pid_t tr = fork();
	cr_assert(tr >= 0);
	if (tr == 0)
		tracer_main(&r, t, rep[1], kill_after);
	close(rep[1]);
	if (read(rep[0], &prog_id, sizeof(prog_id)) != sizeof(prog_id)) {
		kill(t, SIGKILL);
		cr_assert_fail("the tracer did not start (exit %d)",
			       waitpid(tr, &status, 0) == tr ? WEXITSTATUS(status) : -1);
	}
	cr_assert(int3_at(t, &r), "no int3 in the target with probes attached");
	cr_assert(write(gate[1], &b, 1) == 1);
	cr_assert_eq(read(rep[0], &b, 1), 1, "the tracer did not claim %ld stops", kill_after);
	double t0 = now();
	cr_assert_eq(kill(tr, SIGKILL), 0);
	cr_assert_eq(waitpid(tr, &status, 0), tr);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	double t1 = now();

	/* The target finishes natively with the right sum. */
	cr_assert_eq(waitpid(t, &status, 0), t);
	if (!quiet)
		cr_log_info("kill: tracer with %d probes gone after %.2f s, target done %.2f s later",
			    KILL_NPROBES + KILL_EXTRA, t1 - t0, now() - t1);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "target status %#x after the tracer died", status);
	/* Nothing of gebpf stays: no program, no legacy uprobe event. */
	int fd = -1;
	for (int i = 0; i < 200; i++) {
		fd = bpf_prog_get_fd_by_id(prog_id);
		if (fd < 0)
			break;
		close(fd);
		usleep(10000);
	}
	cr_assert(fd < 0 && errno == ENOENT, "program %u still loaded 2 s after the tracer died",
		  prog_id);
	long legacy = pt_legacy_uprobes(tr);
	cr_assert(legacy <= 0, "%ld uprobe_events lines of the dead tracer", legacy);
}

Test(probetrap_life, sigkill_of_tracer_leaves_target_running_and_nothing_behind)
{
	sigkill_tracer(100, false);
}

/* 20 kills at pseudo-random moments (after 1 to 150 claimed stops: the
 * target may be stopped, running, or inside the kernel's uprobe path). */
Test(probetrap_life, sigkill_of_tracer_at_random_moments)
{
	srand(4242);
	for (int i = 0; i < 20; i++)
		sigkill_tracer(1 + rand() % 150, true);
}

/* The same with one perf-event uprobe per probe (kernels before 6.10). */
Test(probetrap_life, sigkill_of_tracer_perf_events)
{
	setenv("GEBPF_PROBETRAP_PERF", "1", 1);   /* this test's own process and its tracer */
	sigkill_tracer(100, false);
}

/* The same, checked on a target still running: its code bytes are the
 * file's again once the tracer is gone. */
Test(probetrap_life, sigkill_of_tracer_removes_int3_from_live_target)
{
	struct pt_run r;
	int gate[2], rep[2], status;
	uint32_t prog_id;

	pt_need();
	pt_run_init(&r);
	pt_probe_self(&r, (uintptr_t)pt_mov);
	pt_probe_self(&r, (uintptr_t)pt_call);
	cr_assert(pipe(gate) == 0 && pipe(rep) == 0);
	pid_t t = fork();
	cr_assert(t >= 0);
	if (t == 0)
		target_main(gate[0]);   /* waits on the gate: never opened here */
	pid_t tr = fork();
	cr_assert(tr >= 0);
	if (tr == 0)
		tracer_main(&r, t, rep[1], 1);
	close(rep[1]);
	cr_assert_eq(read(rep[0], &prog_id, sizeof(prog_id)), (ssize_t)sizeof(prog_id));
	cr_assert(int3_at(t, &r));
	kill(tr, SIGKILL);
	waitpid(tr, &status, 0);
	cr_assert(!int3_at(t, &r), "int3 left in the target after the tracer died");
	kill(t, SIGKILL);
	waitpid(t, &status, 0);
}

/* --- costs (part f) ------------------------------------------------------- */

#define NHITS 2000
#define NSTEPS 4000

static void child_nops_run(void *arg)
{
	(void)arg;
	pt_nops_call();
	_exit(0);
}

#define NADD_MAX 512

/* Before the child runs: one add_many of nadd probes, 4 removed, 1 added
 * back; the child then stops at exactly the nadd - 3 live ones. */
static void add_many(struct pt_run *r, pid_t pid)
{
	const int nadd = (int)(intptr_t)r->ctx;   /* <= NADD_MAX */
	struct pt_run one;
	uint64_t offs[NADD_MAX];
	uint8_t b[NADD_MAX];
	struct iovec l = { b, (size_t)nadd }, rv = { pt_nops, (size_t)nadd };
	struct gb_probetrap_stats st;
	double t0, t1, t2, t3;

	pt_run_init(&one);
	pt_probe_self(&one, (uintptr_t)pt_nops);
	const char *path = one.probe[0].path;
	uint64_t base = one.probe[0].off;
	for (int i = 0; i < nadd; i++)
		offs[i] = base + (uint64_t)i;
	t0 = now();
	int err = gb_probetrap__add_many(r->trap, path, offs, nadd);
	t1 = now();
	cr_assert_eq(err, 0, "add_many: %s", strerror(-err));
	cr_assert_eq(process_vm_readv(pid, &l, 1, &rv, 1, 0), nadd);
	for (int i = 0; i < nadd; i++)
		cr_assert_eq(b[i], 0xCC, "no int3 at nop %d", i);
	cr_assert_eq(gb_probetrap__add(r->trap, path, base), -EEXIST);
	for (int i = 0; i < 8; i += 2)
		cr_assert_eq(gb_probetrap__remove(r->trap, path, base + (uint64_t)i), 0);
	t2 = now();
	cr_assert_eq(gb_probetrap__remove(r->trap, path, base), -ENOENT);
	cr_assert_eq(gb_probetrap__add(r->trap, path, base), 0);
	t3 = now();
	gb_probetrap__stats(r->trap, &st);
	cr_assert_eq(st.probes, nadd - 3);
	/* uprobe_multi keeps a removed probe's int3 (muted); perf events go */
	cr_assert_eq(process_vm_readv(pid, &l, 1, &rv, 1, 0), nadd);
	for (int i = 0; i < nadd; i++)
		cr_assert_eq(b[i], st.multi || i % 2 || i >= 8 || i == 0 ? 0xCC : 0x90,
			     "byte %d after removing 0,2,4,6 and adding 0", i);
	cr_log_info("cost (%s): add_many %.1f us per probe (%d in a mapped file); remove %.1f us; "
		    "add again %.1f us", st.multi ? "uprobe_multi" : "perf events",
		    (t1 - t0) * 1e6 / nadd, nadd, (t2 - t1) * 1e6 / 4, (t3 - t2) * 1e6);
}

/* Many probes are cheap to add together, each puts an int3 in the mapped
 * code; remove silences exactly one, add brings it back; free removes
 * every int3. */
static void many_probes(int nadd)
{
	struct pt_run r;

	pt_need();
	pt_run_init(&r);
	r.before_gate = add_many;
	r.ctx = (void *)(intptr_t)nadd;
	double t0 = now();
	pt_run(&r, child_nops_run, NULL);
	cr_assert_eq(r.exit_code, 0);
	cr_assert_eq(r.nstops, nadd - 3, "%d stops for %d live probes", r.nstops, nadd - 3);
	cr_assert_eq(r.stats.claimed, nadd - 3);
	cr_assert_eq(r.stats.muted, r.stats.multi ? 3 : 0);
	cr_log_info("many probes (%s): traced run + free of %d probes %.2f s",
		    r.stats.multi ? "uprobe_multi" : "perf events", nadd, now() - t0);
}

/* The kernel's choice (uprobe_multi from 6.10), and perf events forced:
 * fewer there, as each costs ~0.1 s to remove. */
Test(probetrap_life, many_probes_add_remove_free)
{
	many_probes(64);
}

Test(probetrap_life, many_probes_perf_events)
{
	setenv("GEBPF_PROBETRAP_PERF", "1", 1);   /* this test's own process */
	many_probes(12);
}



static void child_hits(void *arg)
{
	long sum = 0;
	long (*mov)(void) = (long (*)(void))(void *)pt_mov;
	(void)arg;
	for (int i = 0; i < NHITS; i++)
		sum += mov();
	_exit(sum == 3L * NHITS ? 0 : 1);
}

static void child_steps(void *arg)
{
	(void)arg;
	raise(SIGSTOP);
	for (;;)
		pt_nops_call();
}

/* Seconds per PTRACE_SINGLESTEP round trip (step + waitpid). */
static double raw_step_cost(void)
{
	int status;
	pid_t c = fork();

	cr_assert(c >= 0);
	if (c == 0) {
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		child_steps(NULL);
	}
	cr_assert_eq(waitpid(c, &status, 0), c);
	double t0 = now();
	for (int i = 0; i < NSTEPS; i++) {
		cr_assert_eq(ptrace(PTRACE_SINGLESTEP, c, 0, 0), 0);
		cr_assert_eq(waitpid(c, &status, 0), c);
	}
	double dt = now() - t0;
	kill(c, SIGKILL);
	waitpid(c, &status, 0);
	return dt / NSTEPS;
}

/* A hit's cost (uprobe + BPF + signal stop + claim + resume) against a raw
 * single step, both measured here.  Reported, and loosely bounded. */
Test(probetrap_life, cost_of_a_hit)
{
	struct pt_run r;
	double t0, hit, step;

	pt_need();
	pt_run_init(&r);
	pt_probe_self(&r, (uintptr_t)pt_mov);
	t0 = now();
	pt_run(&r, child_hits, NULL);
	hit = (now() - t0) / NHITS;
	cr_assert_eq(r.exit_code, 0);
	cr_assert_eq(r.stats.claimed, NHITS);
	step = raw_step_cost();
	cr_log_info("cost: hit + stop + claim + resume %.1f us; raw PTRACE_SINGLESTEP %.1f us; "
		    "ratio %.2f raw steps", hit * 1e6, step * 1e6, hit / step);
	cr_assert(hit < 100 * step, "a hit costs %.0f raw steps", hit / step);
}

/* After disarm the probes stay but stop nobody (free's first step; the
 * engine calls it before PTRACE_DETACH when it frees later). */
static void disarm_now(struct pt_run *r, pid_t pid)
{
	(void)pid;
	gb_probetrap__disarm(r->trap);
}

static void child_zone_once(void *arg)
{
	(void)arg;
	_exit(pt_zone() == ZONE_SUM ? 0 : 1);
}

Test(probetrap_life, disarmed_probes_stop_nobody)
{
	struct pt_run r;

	pt_need();
	pt_run_init(&r);
	pt_probe_self(&r, (uintptr_t)pt_mov);
	pt_probe_self(&r, (uintptr_t)pt_call);
	r.before_gate = disarm_now;
	pt_run(&r, child_zone_once, NULL);
	cr_assert_eq(r.exit_code, 0);
	cr_assert_eq(r.nstops, 0, "%d stops after disarm", r.nstops);
	cr_assert_eq(r.stats.signals + r.stats.records, 0);
}
