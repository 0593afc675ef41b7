/* The probe trap (user/probe/probetrap.h) against real tracees, and the
 * ptrace + uprobes behaviour of this kernel that its contract states.  A
 * forked child, seized with PTRACE_SEIZE, runs the assembly functions below
 * (each starts with one kind of instruction) after a pipe handshake; the
 * parent probes their first instructions and checks every stop.  Needs root,
 * uprobes and BPF: skipped with the reason otherwise. */
#include <criterion/criterion.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe/probetrap.h"
#include "ptrace/maps.h"
#include "pt_util.h"

/* Each pt_K starts with one instruction kind; pt_K_n is where the thread is
 * once that instruction ran (for call/jmp: the target).  pt_zone calls
 * them all and returns the sum of their results (50). */
__asm__(
	"	.text\n"
	"	.p2align 4\n"
	"	.globl pt_zone\n"
	"pt_zone:\n"
	"	push %rbx\n"
	"	xor %ebx, %ebx\n"
	"	call pt_endbr\n	add %rax, %rbx\n"
	"	call pt_push\n	add %rax, %rbx\n"
	"	call pt_mov\n	add %rax, %rbx\n"
	"	call pt_sub\n	add %rax, %rbx\n"
	"	call pt_call\n	add %rax, %rbx\n"
	"	call pt_jmp\n	add %rax, %rbx\n"
	"	call pt_nop\n	add %rax, %rbx\n"
	"	call pt_lea\n	add %rax, %rbx\n"
	"	call pt_cmp\n	add %rax, %rbx\n"
	"	mov %rbx, %rax\n"
	"	pop %rbx\n"
	"	.globl pt_zone_end\n"
	"pt_zone_end: ret\n"
	"	.globl pt_endbr, pt_endbr_n\n"
	"pt_endbr: endbr64\n"
	"pt_endbr_n: mov $1, %eax\n	ret\n"
	"	.globl pt_push, pt_push_n\n"
	"pt_push: push %rbp\n"
	"pt_push_n: mov %rsp, %rbp\n	mov $2, %eax\n	pop %rbp\n	ret\n"
	"	.globl pt_mov, pt_mov_n\n"
	"pt_mov: mov $3, %eax\n"
	"pt_mov_n: ret\n"
	"	.globl pt_sub, pt_sub_n\n"
	"pt_sub: sub $24, %rsp\n"
	"pt_sub_n: mov $4, %eax\n	add $24, %rsp\n	ret\n"
	"	.globl pt_call, pt_call_n\n"
	"pt_call: call pt_leaf\n"
	"	add $1, %eax\n	ret\n"            /* 5 + 1 = 6 */
	"	.globl pt_leaf\n"
	"pt_leaf: mov $5, %eax\n	ret\n"
	"	.globl pt_jmp\n"
	"pt_jmp: jmp pt_leaf2\n"
	"	ud2\n"
	"	.globl pt_leaf2\n"
	"pt_leaf2: mov $7, %eax\n	ret\n"
	"	.globl pt_nop, pt_nop_n\n"
	"pt_nop: nop\n"
	"pt_nop_n: mov $8, %eax\n	ret\n"
	"	.globl pt_lea, pt_lea_n\n"
	"pt_lea: lea pt_zone(%rip), %rax\n"
	"pt_lea_n: mov $9, %eax\n	ret\n"
	"	.globl pt_cmp, pt_cmp_n\n"
	"pt_cmp: cmpq $0, pt_cmp_zero(%rip)\n"
	"pt_cmp_n: mov $10, %eax\n	ret\n"
	"	.globl pt_int3, pt_syscall, pt_lock\n"
	"pt_int3: int3\n"                  /* never run: probed to see refusals */
	"pt_syscall: syscall\n"
	"pt_lock: lock addl $1, (%rsp)\n"
	"	.section .rodata\n"
	"pt_cmp_zero: .quad 0\n"
	"	.text\n");

extern char pt_zone_end[], pt_int3[], pt_syscall[], pt_lock[];
extern char pt_endbr[], pt_endbr_n[], pt_push[], pt_push_n[], pt_mov[], pt_mov_n[], pt_sub[],
	pt_sub_n[], pt_call[], pt_leaf[], pt_jmp[], pt_leaf2[], pt_nop[], pt_nop_n[], pt_lea[],
	pt_lea_n[], pt_cmp[], pt_cmp_n[];
long pt_zone(void);
#define ZONE_SUM 50

/* Registers an instruction writes (besides rip). */
enum { W_RAX = 1, W_RSP = 2, W_FLAGS = 4 };

/* probe -> where the thread is once the probed instruction ran */
static const struct kind {
	const char *name;
	char *at, *next;
	unsigned writes;
} kinds[] = {
	{ "endbr64", pt_endbr, pt_endbr_n, 0 },
	{ "push rbp", pt_push, pt_push_n, W_RSP },
	{ "mov imm", pt_mov, pt_mov_n, W_RAX },
	{ "sub rsp", pt_sub, pt_sub_n, W_RSP | W_FLAGS },
	{ "call", pt_call, pt_leaf, W_RSP },
	{ "jmp", pt_jmp, pt_leaf2, 0 },
	{ "nop", pt_nop, pt_nop_n, 0 },
	{ "lea rip", pt_lea, pt_lea_n, W_RAX },
	{ "cmp rip-mem", pt_cmp, pt_cmp_n, W_FLAGS },
};

static void same_but(const struct user_regs_struct *a, const struct user_regs_struct *b,
		     unsigned writes, const char *name)
{
#define SAME(f) cr_assert_eq(a->f, b->f, "%s changed " #f ": %#llx -> %#llx", name, \
			     (unsigned long long)a->f, (unsigned long long)b->f)
	SAME(r15); SAME(r14); SAME(r13); SAME(r12); SAME(rbp); SAME(rbx); SAME(r11);
	SAME(r10); SAME(r9); SAME(r8); SAME(rcx); SAME(rdx); SAME(rsi); SAME(rdi);
	SAME(cs); SAME(ss); SAME(fs_base); SAME(gs_base);
	if (!(writes & W_RAX))
		SAME(rax);
	if (!(writes & W_RSP))
		SAME(rsp);
	if (!(writes & W_FLAGS))
		SAME(eflags);
#undef SAME
}
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

static void child_zone(void *arg)
{
	(void)arg;
	_exit(pt_zone() == ZONE_SUM ? 0 : 1);
}

/* Part a: a natively running thread stops AFTER the probed instruction
 * (next instruction or branch target), with the record's rip == probe. */
Test(probetrap, native_stop_after_probed_instruction)
{
	struct pt_run r;

	pt_need();
	pt_run_init(&r);
	for (size_t k = 0; k < NKINDS; k++)
		pt_probe_self(&r, (uintptr_t)kinds[k].at);
	pt_run(&r, child_zone, NULL);
	cr_assert_eq(r.exit_code, 0, "the traced zone computed a wrong sum (exit %d)", r.exit_code);
	cr_assert_eq(r.nstops, NKINDS, "%d stops for %zu probes", r.nstops, NKINDS);
	for (size_t k = 0; k < NKINDS; k++) {
		const struct pt_stop *s = &r.stops[k];
		cr_assert(s->claimed, "%s: stop %d not claimed", kinds[k].name, s->sig);
		cr_assert_eq(s->sig, SIGURG);
		cr_assert_eq(s->code, SI_KERNEL);
		cr_assert_eq(s->hit.addr, (uintptr_t)kinds[k].at, "%s: hit at %#lx", kinds[k].name,
			     (unsigned long)s->hit.addr);
		cr_assert_eq(s->hit.regs.rip, s->hit.addr);
		cr_assert_eq(s->regs.rip, (uintptr_t)kinds[k].next,
			     "%s: stopped at %+ld from the probe, expected %+ld", kinds[k].name,
			     (long)(s->regs.rip - s->hit.addr),
			     (long)((uintptr_t)kinds[k].next - (uintptr_t)kinds[k].at));
		cr_assert_eq(s->hit.flags, 0);
		/* Every register the instruction does not write is the same
		 * before and after: the out-of-line step's scratch register (for
		 * RIP-relative operands) is restored. */
		same_but(&s->hit.regs, &s->regs, kinds[k].writes, kinds[k].name);
		cr_log_info("native %-12s probe at +0: stop at %+ld", kinds[k].name,
			    (long)(s->regs.rip - s->hit.addr));
	}
	/* push / call / sub moved rsp; the others did not. */
	cr_assert_eq(r.stops[1].regs.rsp, r.stops[1].hit.regs.rsp - 8);
	cr_assert_eq(r.stops[3].regs.rsp, r.stops[3].hit.regs.rsp - 24);
	cr_assert_eq(r.stops[4].regs.rsp, r.stops[4].hit.regs.rsp - 8);
	cr_assert_eq(r.stops[2].regs.rsp, r.stops[2].hit.regs.rsp);
	cr_assert_eq(r.stops[2].regs.rax & 0xffffffff, 3);   /* the mov ran */
	cr_assert_eq(r.stops[7].regs.rax, (uintptr_t)pt_zone); /* lea pt_zone(%rip) */
	cr_assert(r.stops[8].regs.eflags & 0x40, "cmp $0 with 0: ZF");
	cr_assert_eq(r.stats.hits, NKINDS);
	cr_assert_eq(r.stats.records, NKINDS);
	cr_assert_eq(r.stats.signals, NKINDS);
	cr_assert_eq(r.stats.claimed, NKINDS);
	cr_assert_eq(r.stats.lost + r.stats.sigstops + r.stats.other, 0);
}

static const struct kind *kind_at(uint64_t addr)
{
	for (size_t k = 0; k < NKINDS; k++)
		if ((uintptr_t)kinds[k].at == addr)
			return &kinds[k];
	return NULL;
}

static void probe_kinds(struct pt_run *r)
{
	for (size_t k = 0; k < NKINDS; k++)
		pt_probe_self(r, (uintptr_t)kinds[k].at);
}

/* Part b: a thread in "stepping" single-stepped across probed addresses
 * gets no record and no signal; each step over a probe ends in one stop, at
 * the same place as without the probe, but with uprobes' SIGTRAP
 * (is_step_artifact); no extra stop follows. */
Test(probetrap, stepping_thread_steps_over_probes)
{
	static struct pt_run base, probed;

	pt_need();
	for (int pass = 0; pass < 2; pass++) {
		struct pt_run *r = pass ? &probed : &base;
		pt_run_init(r);
		pt_probe_self(r, (uintptr_t)pt_zone);
		if (pass)
			probe_kinds(r);
		r->step_from = (uintptr_t)pt_zone;
		r->step_until = (uintptr_t)pt_zone_end;
		pt_run(r, child_zone, NULL);
		cr_assert_eq(r->exit_code, 0, "wrong sum (exit %d)", r->exit_code);
		cr_assert_eq(r->nstops, 1, "%d signal stops (pass %d)", r->nstops, pass);
		cr_assert(r->stops[0].claimed);
	}
	cr_assert_eq(probed.nsteps, base.nsteps, "%d steps with probes, %d without", probed.nsteps,
		     base.nsteps);
	int over = 0;
	for (int i = 0; i < base.nsteps; i++) {
		const struct pt_step *b = &base.steps[i], *p = &probed.steps[i];
		const struct kind *k = kind_at(p->rip_before);
		cr_assert_eq(p->rip_before, b->rip_before, "step %d", i);
		cr_assert_eq(p->rip_after, b->rip_after, "step %d from %#lx", i,
			     (unsigned long)p->rip_before);
		/* A step over a probe changes only what the instruction writes,
		 * and that as without the probe (the runs started from other
		 * caller-saved values, so only those are compared). */
		if (k && i > 0) {
			const struct user_regs_struct *p0 = &probed.steps[i - 1].regs;
			const struct user_regs_struct *b0 = &base.steps[i - 1].regs;
			same_but(p0, &p->regs, k->writes, k->name);
			if (k->writes & W_RAX)
				cr_assert_eq(p->regs.rax, b->regs.rax, "%s: rax", k->name);
			if (k->writes & W_RSP)
				cr_assert_eq(p->regs.rsp - p0->rsp, b->regs.rsp - b0->rsp, "%s: rsp",
					     k->name);
		}
		cr_assert(!b->artifact);
		if (!k) {
			cr_assert_eq(p->code, b->code, "step %d: si_code %d, %d unprobed", i, p->code,
				     b->code);
			cr_assert(!p->artifact);
			continue;
		}
		over++;
		cr_log_info("step over %-12s: SIGTRAP si_code %d si_pid %s (unprobed: si_code %d)",
			    k->name, p->code, p->from_pid ? "= tracee" : "0", b->code);
		cr_assert(p->artifact, "%s: step stop si_code %d si_pid %d not an artifact", k->name,
			  p->code, p->from_pid);
	}
	cr_assert_eq(over, NKINDS);
	cr_assert_eq(probed.stats.stepping, NKINDS);
	cr_assert_eq(probed.stats.records, 1);
	cr_assert_eq(probed.stats.signals, 1);
}

/* Part c: the int3 shows in the tracee's memory; orig_bytes puts the file's
 * bytes back.  Our own copy (not probed) is the reference. */
static void check_bytes(struct pt_run *r, pid_t pid)
{
	uint8_t *lo = (uint8_t *)pt_endbr, *hi = (uint8_t *)pt_cmp_n + 16;
	size_t len = (size_t)(hi - lo);
	uint8_t got[512], mem[512];
	int diff = 0;

	cr_assert(len <= sizeof(got));
	struct iovec l = { got, len }, rv = { lo, len };
	cr_assert_eq(process_vm_readv(pid, &l, 1, &rv, 1, 0), (ssize_t)len);
	char f[64];
	snprintf(f, sizeof(f), "/proc/%d/mem", (int)pid);
	int fd = open(f, O_RDONLY);
	cr_assert(fd >= 0);
	cr_assert_eq(pread(fd, mem, len, (off_t)(uintptr_t)lo), (ssize_t)len);
	close(fd);
	cr_assert(!memcmp(got, mem, len), "process_vm_readv and /proc/PID/mem differ");
	for (size_t i = 0; i < len; i++)
		if (got[i] != lo[i]) {
			cr_assert_eq(got[i], 0xCC, "byte %+zd is %#x", i, got[i]);
			cr_assert(kind_at((uintptr_t)lo + i), "int3 at %+zd, not a probe", i);
			diff++;
		}
	cr_assert_eq(diff, NKINDS, "%d bytes differ from the file, %zu probes", diff, NKINDS);
	cr_assert_eq(gb_probetrap__orig_bytes(r->trap, (uintptr_t)lo, got, len), NKINDS);
	cr_assert(!memcmp(got, lo, len), "orig_bytes left a difference");
	/* a window starting inside: only what it holds */
	cr_assert_eq(gb_probetrap__orig_bytes(r->trap, (uintptr_t)pt_push + 1, mem + 1, 3), 0);
	/* The tracer maps the same file: untouched (part d). */
	cr_assert_eq(pt_zone(), ZONE_SUM);
}

Test(probetrap, memory_shows_int3_orig_bytes_restores)
{
	struct pt_run r;

	pt_need();
	pt_run_init(&r);
	probe_kinds(&r);
	r.before_gate = check_bytes;
	pt_run(&r, child_zone, NULL);
	cr_assert_eq(r.exit_code, 0);
	cr_assert_eq(r.nstops, NKINDS);
	cr_assert_eq(r.stats.other, 0, "the tracer's own call was seen");
}

/* Part d: fork and vfork children of the tracee run the probed code
 * untouched: no stop, no signal (a SIGURG handler would count it). */
static volatile sig_atomic_t urgs;
static void on_urg(int s)
{
	(void)s;
	urgs++;
}

static void child_forks(void *arg)
{
	int st;

	(void)arg;
	signal(SIGURG, on_urg);
	pid_t c = fork();
	if (c == 0)
		_exit(pt_zone() == ZONE_SUM && urgs == 0 ? 0 : 3);
	if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st))
		_exit(4);
	c = vfork();
	if (c == 0)
		_exit(pt_zone() == ZONE_SUM && urgs == 0 ? 0 : 3);
	if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st))
		_exit(5);
	/* the tracee itself: every probe stops it (claimed: no handler runs) */
	_exit(pt_zone() == ZONE_SUM && urgs == 0 ? 0 : 6);
}

Test(probetrap, fork_and_vfork_children_untouched)
{
	struct pt_run r;

	pt_need();
	pt_run_init(&r);
	probe_kinds(&r);
	pt_run(&r, child_forks, NULL);
	cr_assert_eq(r.exit_code, 0, "exit %d (3: a child was signalled or wrong, 4 fork, 5 vfork)",
		     r.exit_code);
	int claimed = 0;
	for (int i = 0; i < r.nstops; i++) {
		claimed += r.stops[i].claimed;
		cr_assert(r.stops[i].claimed || r.stops[i].sig == SIGCHLD, "stop with signal %d",
			  r.stops[i].sig);
	}
	cr_assert_eq(claimed, NKINDS, "%d claimed stops", claimed);
	cr_assert_eq(r.stats.signals, NKINDS);
	cr_log_info("fork+vfork: hits of other processes seen by the program: %lu",
		    (unsigned long)r.stats.other);
}

/* The thread blocks SIGURG: SIGWINCH instead (ignored by default, as
 * SIGURG is: one left behind by a gebpf that died stops nothing), at the
 * same places. */
static void child_blocks_urg(void *arg)
{
	sigset_t s;

	(void)arg;
	sigemptyset(&s);
	sigaddset(&s, SIGURG);
	sigprocmask(SIG_BLOCK, &s, NULL);
	_exit(pt_zone() == ZONE_SUM ? 0 : 1);
}

Test(probetrap, blocked_signal_falls_back_to_sigwinch)
{
	struct pt_run r;

	pt_need();
	pt_run_init(&r);
	probe_kinds(&r);
	pt_run(&r, child_blocks_urg, NULL);
	cr_assert_eq(r.exit_code, 0);
	cr_assert_eq(r.nstops, NKINDS, "%d stops", r.nstops);
	for (size_t k = 0; k < NKINDS; k++) {
		const struct pt_stop *s = &r.stops[k];
		cr_assert_eq(s->sig, SIGWINCH, "%s: signal %d", kinds[k].name, s->sig);
		cr_assert(s->claimed);
		cr_assert_eq(s->hit.flags & GB_PROBE_HIT_SIGSTOP, 0);
		cr_assert_eq(s->hit.addr, (uintptr_t)kinds[k].at);
		cr_assert_eq(s->regs.rip, (uintptr_t)kinds[k].next);
	}
	cr_assert_eq(r.stats.alts, NKINDS);
	cr_assert_eq(r.stats.sigstops, 0);
}

/* The thread blocks every signal (SIGURG and SIGWINCH too): SIGSTOP
 * instead, at the same places. */
static void child_blocks(void *arg)
{
	sigset_t s;

	(void)arg;
	sigfillset(&s);
	sigprocmask(SIG_BLOCK, &s, NULL);
	_exit(pt_zone() == ZONE_SUM ? 0 : 1);
}

Test(probetrap, blocked_signal_falls_back_to_sigstop)
{
	struct pt_run r;

	pt_need();
	pt_run_init(&r);
	probe_kinds(&r);
	pt_run(&r, child_blocks, NULL);
	cr_assert_eq(r.exit_code, 0);
	cr_assert_eq(r.nstops, NKINDS, "%d stops", r.nstops);
	for (size_t k = 0; k < NKINDS; k++) {
		const struct pt_stop *s = &r.stops[k];
		cr_assert_eq(s->sig, SIGSTOP, "%s: signal %d", kinds[k].name, s->sig);
		cr_assert(s->claimed);
		cr_assert_eq(s->hit.flags, GB_PROBE_HIT_SIGSTOP);
		cr_assert_eq(s->hit.addr, (uintptr_t)kinds[k].at);
		cr_assert_eq(s->regs.rip, (uintptr_t)kinds[k].next);
	}
	cr_assert_eq(r.stats.sigstops, NKINDS);
}

/* The program's own SIGURGs (tgkill, kill, and the kernel's for TCP urgent
 * data, SI_KERNEL like gebpf's) are not claimed: its handler sees all three. */
static void child_own_urg(void *arg)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int l, c, s;

	(void)arg;
	signal(SIGURG, on_urg);
	raise(SIGURG);
	kill(getpid(), SIGURG);
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (void *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (void *)&a, &al))
		_exit(7);
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (void *)&a, sizeof(a)) || (s = accept(l, NULL, NULL)) < 0)
		_exit(8);
	fcntl(s, F_SETOWN, getpid());
	if (send(c, "!", 1, MSG_OOB) != 1)
		_exit(9);
	for (int i = 0; i < 1000 && urgs < 3; i++)
		usleep(1000);
	_exit(pt_zone() == ZONE_SUM ? urgs : 10);
}

Test(probetrap, programs_own_sigurg_not_claimed)
{
	struct pt_run r;
	int own = 0, kernel = 0;

	pt_need();
	pt_run_init(&r);
	probe_kinds(&r);
	pt_run(&r, child_own_urg, NULL);
	cr_assert_eq(r.exit_code, 3, "exit %d: the handler ran that many times (3 expected)",
		     r.exit_code);
	for (int i = 0; i < r.nstops; i++) {
		if (r.stops[i].claimed)
			continue;
		cr_assert_eq(r.stops[i].sig, SIGURG);
		own++;
		kernel += r.stops[i].code == SI_KERNEL;
	}
	cr_assert_eq(own, 3);
	cr_assert_eq(kernel, 1, "the TCP urgent-data SIGURG has si_code SI_KERNEL");
	cr_assert_eq(r.nstops - own, NKINDS);
}

/* Instructions the kernel will not probe, in a file the process maps: add
 * fails, and says so (which errno).  Others are accepted. */
static void try_refused(struct pt_run *r, pid_t pid)
{
	static const struct { const char *name; char *at; bool ok; } v[] = {
		{ "int3", pt_int3, false },
		{ "syscall", pt_syscall, true },
		{ "lock add", pt_lock, false },   /* uprobes refuse a LOCK prefix */
	};
	(void)pid;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct pt_run one;
		pt_run_init(&one);
		pt_probe_self(&one, (uintptr_t)v[i].at);
		int err = gb_probetrap__add(r->trap, one.probe[0].path, one.probe[0].off);
		cr_log_info("add on %s: %s", v[i].name, err ? strerror(-err) : "accepted");
		if (v[i].ok)
			cr_assert_eq(err, 0, "%s refused: %s", v[i].name, strerror(-err));
		else
			cr_assert(err < 0, "%s accepted", v[i].name);
	}
}

Test(probetrap, refused_instruction_fails_add)
{
	struct pt_run r;

	pt_need();
	pt_run_init(&r);
	r.before_gate = try_refused;
	pt_run(&r, child_zone, NULL);
	cr_assert_eq(r.exit_code, 0);
	cr_assert_eq(r.nstops, 0);
}

/* The poll descriptor is readable at a stop, drain moves the record, and
 * claim still finds it; bad options give NULL and one warning. */
Test(probetrap, poll_drain_then_claim)
{
	struct pt_run r;

	pt_need();
	pt_run_init(&r);
	probe_kinds(&r);
	r.drain_first = true;
	pt_run(&r, child_zone, NULL);
	cr_assert_eq(r.exit_code, 0);
	cr_assert_eq(r.nstops, NKINDS);
	cr_assert_eq(r.drained, NKINDS);
	for (int i = 0; i < r.nstops; i++)
		cr_assert(r.stops[i].claimed && r.stops[i].hit.addr == (uintptr_t)kinds[i].at);
}

Test(probetrap, bad_options_give_null)
{
	cr_assert_null(gb_probetrap__new(&(struct gb_probetrap_opts){ .tgid = 0, .quiet = true }));
	cr_assert_null(gb_probetrap__new(&(struct gb_probetrap_opts){ .tgid = 1, .signo = SIGKILL,
								     .quiet = true }));
	gb_probetrap__free(NULL);
	cr_assert(!gb_probetrap__claim(NULL, 1, SIGURG, NULL, NULL));
}
