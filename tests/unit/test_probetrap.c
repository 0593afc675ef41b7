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
#include <sys/ptrace.h>
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
	"	ret\n"
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
	"	.section .rodata\n"
	"pt_cmp_zero: .quad 0\n"
	"	.text\n");

extern char pt_endbr[], pt_endbr_n[], pt_push[], pt_push_n[], pt_mov[], pt_mov_n[], pt_sub[],
	pt_sub_n[], pt_call[], pt_leaf[], pt_jmp[], pt_leaf2[], pt_nop[], pt_nop_n[], pt_lea[],
	pt_lea_n[], pt_cmp[], pt_cmp_n[];
long pt_zone(void);
#define ZONE_SUM 50

/* probe -> where the thread is once the probed instruction ran */
static const struct kind {
	const char *name;
	char *at, *next;
} kinds[] = {
	{ "endbr64", pt_endbr, pt_endbr_n },
	{ "push rbp", pt_push, pt_push_n },
	{ "mov imm", pt_mov, pt_mov_n },
	{ "sub rsp", pt_sub, pt_sub_n },
	{ "call", pt_call, pt_leaf },
	{ "jmp", pt_jmp, pt_leaf2 },
	{ "nop", pt_nop, pt_nop_n },
	{ "lea rip", pt_lea, pt_lea_n },
	{ "cmp rip-mem", pt_cmp, pt_cmp_n },
};
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
		/* Registers the instruction does not touch are the same. */
		cr_assert_eq(s->hit.regs.rbx, s->regs.rbx);
		cr_assert_eq(s->hit.regs.r12, s->regs.r12);
		cr_assert_eq(s->hit.regs.cs, s->regs.cs);
		cr_assert_eq(s->hit.regs.ss, s->regs.ss);
		cr_log_info("native %-12s probe at +0: stop at %+ld", kinds[k].name,
			    (long)(s->regs.rip - s->hit.addr));
	}
	/* push / call / sub moved rsp; the others did not. */
	cr_assert_eq(r.stops[1].regs.rsp, r.stops[1].hit.regs.rsp - 8);
	cr_assert_eq(r.stops[3].regs.rsp, r.stops[3].hit.regs.rsp - 24);
	cr_assert_eq(r.stops[4].regs.rsp, r.stops[4].hit.regs.rsp - 8);
	cr_assert_eq(r.stops[2].regs.rsp, r.stops[2].hit.regs.rsp);
	cr_assert_eq(r.stops[2].regs.rax & 0xffffffff, 3);   /* the mov ran */
	cr_assert_eq(r.stats.hits, NKINDS);
	cr_assert_eq(r.stats.records, NKINDS);
	cr_assert_eq(r.stats.signals, NKINDS);
	cr_assert_eq(r.stats.claimed, NKINDS);
	cr_assert_eq(r.stats.lost + r.stats.sigstops + r.stats.other, 0);
}
