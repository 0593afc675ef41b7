// SPDX-License-Identifier: GPL-2.0
/* Sampler: a perf_event program on one per-CPU event (cpu-clock, or a
 * hardware event where a PMU exists).  It runs for every sample on every
 * CPU and drops, in the kernel, samples of other processes (tgid filter as
 * rodata) and samples whose user pc lies outside [range_start, range_end];
 * the rest go to the shared ring buffer.  Every decision is counted (see
 * enum gb_counter), so nothing is hidden.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "gb_maps.bpf.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 targ_tgid = 0;        /* the sampled process (required) */
const volatile bool has_range = false;     /* filter by user pc */
const volatile bool want_stack = false;    /* records carry the user stack (--folded) */
const volatile bool has_task_pt_regs = false; /* bpf_task_pt_regs() exists (5.15+) */

/* Inclusive pc range.  Writable (.data, memory-mapped) rather than rodata:
 * a SYMBOL range of a launched command is only known after exec, when the
 * programs are already running.  Until then it is empty (start > end). */
__u64 range_start SEC(".data") = 1;
__u64 range_end SEC(".data") = 0;

/* The x86-64 UAPI layout of bpf_user_pt_regs_t (struct pt_regs in
 * asm/ptrace.h).  Context fields must be loaded whole (8 bytes), so cs is
 * read as the u64 slot it occupies rather than through the kernel's
 * narrower field. */
struct gb_x86_regs {
	__u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	__u64 ax, cx, dx, si, di, orig_ax;
	__u64 ip, cs, flags, sp, ss;
};

/* x86-64 kernel stack size (THREAD_SIZE without KASAN): where the user
 * registers sit on kernels that lack bpf_task_pt_regs(). */
#define GB_THREAD_SIZE (4096UL << 2)

/* The pc the current task will return to in user mode. */
static __always_inline __u64 user_pc_from_kernel(void)
{
	struct pt_regs *r;

	if (has_task_pt_regs) {
		r = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
		return BPF_CORE_READ(r, ip);
	}
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	void *stack = BPF_CORE_READ(t, stack);
	if (!stack)
		return 0;
	r = (struct pt_regs *)(stack + GB_THREAD_SIZE) - 1;
	return BPF_CORE_READ(r, ip);
}

SEC("perf_event")
int gb_sample(struct bpf_perf_event_data *ctx)
{
	struct gb_x86_regs *regs = (struct gb_x86_regs *)&ctx->regs;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct gb_ev_sample *s;
	__u32 flags = 0;
	__u64 pc;

	gb_count(GB_CNT_SEEN);
	if ((pid_tgid >> 32) != targ_tgid || !armed) {
		gb_count(GB_CNT_OTHER);
		return 0;
	}
	if ((regs->cs & 3) == 3) {
		pc = regs->ip;
	} else {
		flags |= GB_SAMPLE_F_KERNEL;
		pc = user_pc_from_kernel();
	}
	if (has_range && (pc < range_start || pc > range_end)) {
		gb_count(GB_CNT_OUT_OF_RANGE);
		return 0;
	}

	if (want_stack) {
		struct gb_ev_sample_stack *e;
		long n;

		e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (!e) {
			gb_count(GB_CNT_LOST);
			return 0;
		}
		n = bpf_get_stack(ctx, e->stack, sizeof(e->stack), BPF_F_USER_STACK);
		e->nframes = n > 0 ? (__u64)n / sizeof(__u64) : 0;
		s = &e->s;
		gb_fill_hdr(&s->h, GB_EV_SAMPLE_STACK, pid_tgid);
		s->pc = pc;
		s->flags = flags;
		s->pad = 0;
		bpf_ringbuf_submit(e, gb_submit_flags());
	} else {
		s = bpf_ringbuf_reserve(&events, sizeof(*s), 0);
		if (!s) {
			gb_count(GB_CNT_LOST);
			return 0;
		}
		gb_fill_hdr(&s->h, GB_EV_SAMPLE, pid_tgid);
		s->pc = pc;
		s->flags = flags;
		s->pad = 0;
		bpf_ringbuf_submit(s, gb_submit_flags());
	}
	gb_count(GB_CNT_KEPT);
	return 0;
}
