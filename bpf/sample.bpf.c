// SPDX-License-Identifier: GPL-2.0
/* Sampler: a perf_event program on one per-CPU event (cpu-clock, or a
 * hardware event where a PMU exists).  It runs for every sample on every
 * CPU and drops, in the kernel, samples outside the scope (a set of
 * processes that grows with their forks, one cgroup, or every process) and
 * samples whose user pc lies outside [range_start, range_end]; the rest go
 * to the shared ring buffer, with stacks when asked:
 *   frame pointers  bpf_get_stack(BPF_F_USER_STACK)
 *   DWARF           the user registers and the top stack_size bytes of the
 *                   user stack, unwound in user space (user/unwind/)
 *   kernel          bpf_get_stack() of the kernel stack
 *   Python          the frame chain of a registered CPython process
 *                   (pyframes.bpf.h), named in user space
 * Every decision is counted (see enum gb_counter), so nothing is hidden.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "gb_maps.bpf.h"
#include "pyframes.bpf.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 self_tgid = 0;        /* gebpf itself: never sampled */
const volatile bool scope_all = false;     /* every process */
const volatile __u64 targ_cgroup = 0;      /* cgroup v2 id (0: no cgroup scope) */
const volatile bool has_range = false;     /* filter by user pc */
const volatile bool want_fp = false;       /* frame-pointer user stacks */
const volatile bool want_regs = false;     /* user registers + stack copy (DWARF) */
const volatile bool want_kernel = false;   /* kernel stacks */
const volatile __u32 stack_size = 8192;    /* bytes of user stack to copy */
const volatile bool has_task_pt_regs = false; /* bpf_task_pt_regs() exists (5.15+) */

/* Inclusive pc range.  Writable (.data, memory-mapped) rather than rodata:
 * a SYMBOL range of a launched command is only known after exec, when the
 * programs are already running.  Until then it is empty (start > end). */
__u64 range_start SEC(".data") = 1;
__u64 range_end SEC(".data") = 0;

/* The processes sampled (-p, a launched command), and the processes they
 * fork while sampled (sched_process_fork below). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u8);
} targets SEC(".maps");

/* One record under construction per CPU, indexed by CPU (user space sets
 * max_entries to the number of possible CPUs): too big for the 512-byte
 * BPF stack, and a per-CPU array value is limited to 32 KiB.  perf_event
 * programs do not nest on one CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gb_ev_sample_stack);
} scratch SEC(".maps");

/* x86-64 kernel stack size (THREAD_SIZE without KASAN): where the user
 * registers sit on kernels that lack bpf_task_pt_regs(). */
#define GB_THREAD_SIZE (4096UL << 2)
#define PAGE 4096u

/* The user registers saved on kernel entry of the current task. */
static __always_inline struct pt_regs *user_regs_in_kernel(void)
{
	if (has_task_pt_regs)
		return (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	void *stack = BPF_CORE_READ(t, stack);
	if (!stack)
		return NULL;
	return (struct pt_regs *)(stack + GB_THREAD_SIZE) - 1;
}

static __always_inline bool in_scope(__u32 tgid)
{
	if (!armed || tgid == self_tgid)
		return false;
	if (scope_all)
		return tgid != 0;    /* not the idle task */
	if (targ_cgroup)
		return bpf_get_current_cgroup_id() == targ_cgroup;
	return bpf_map_lookup_elem(&targets, &tgid) != NULL;
}

/* Copy up to stack_size bytes from sp: the partial first page, then page
 * by page, so a copy ends exactly at the end of the stack mapping. */
static __always_inline __u64 copy_stack(struct gb_ev_sample_stack *e, __u64 sp)
{
	__u64 len = 0, n = PAGE - (sp & (PAGE - 1)), want = stack_size;

	for (int i = 0; i < GB_MAX_STACK_BYTES / PAGE + 1; i++) {
		if (len >= want || len > GB_MAX_STACK_BYTES - PAGE)
			break;
		if (n > want - len)
			n = want - len;
		/* Bounds the verifier can see: 1 <= n <= PAGE, len + n fits. */
		barrier_var(n);
		if (n == 0 || n > PAGE)
			break;
		barrier_var(len);
		if (len > GB_MAX_STACK_BYTES - PAGE)
			break;
		if (bpf_probe_read_user(&e->stack[len], n, (void *)(sp + len)))
			break;
		len += n;
		n = PAGE;
	}
	return len;
}

static __always_inline int emit_stack(struct bpf_perf_event_data *ctx, __u64 pid_tgid,
				      __u64 pc, __u32 flags, struct gb_user_regs *uctx)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct gb_ev_sample_stack *e = bpf_map_lookup_elem(&scratch, &cpu);
	long n;

	if (!e)
		return -1;
	gb_fill_hdr(&e->s.h, GB_EV_SAMPLE_STACK, pid_tgid);
	e->s.pc = pc;
	e->s.pad = 0;
	bpf_get_current_comm(e->s.comm, sizeof(e->s.comm));
	e->nuser = 0;
	e->nkernel = 0;
	e->stack_len = 0;
	py_frames(e, pid_tgid);
	if (want_kernel && (flags & GB_SAMPLE_F_KERNEL)) {
		n = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
		e->nkernel = n > 0 ? (__u32)((__u64)n / 8) : 0;
	}
	if (want_fp) {
		n = bpf_get_stack(ctx, e->ustack, sizeof(e->ustack), BPF_F_USER_STACK);
		e->nuser = n > 0 ? (__u32)((__u64)n / 8) : 0;
	}
	if (want_regs) {
		if (uctx) {
			__builtin_memcpy(&e->uregs, uctx, sizeof(e->uregs));
		} else {
			struct pt_regs *r = user_regs_in_kernel();
			if (!r || bpf_probe_read_kernel(&e->uregs, sizeof(e->uregs), r))
				goto out;
		}
		flags |= GB_SAMPLE_F_REGS;
		e->stack_len = copy_stack(e, e->uregs.sp);
	}
out:
	e->s.flags = flags;
	__u64 size = __builtin_offsetof(struct gb_ev_sample_stack, stack) + e->stack_len;
	if (size > sizeof(*e))
		return -1;
	if (bpf_ringbuf_output(&events, e, size, gb_submit_flags()))
		return -1;
	return 0;
}

SEC("perf_event")
int gb_sample(struct bpf_perf_event_data *ctx)
{
	struct gb_user_regs *regs = (struct gb_user_regs *)&ctx->regs;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct gb_user_regs *uctx = NULL;
	struct gb_ev_sample *s;
	__u32 flags = 0;
	__u64 pc;

	gb_count(GB_CNT_SEEN);
	if (!in_scope(pid_tgid >> 32)) {
		gb_count(GB_CNT_OTHER);
		return 0;
	}
	if ((regs->cs & 3) == 3) {
		pc = regs->ip;
		uctx = regs;
	} else {
		struct pt_regs *r = user_regs_in_kernel();
		flags |= GB_SAMPLE_F_KERNEL;
		pc = r ? BPF_CORE_READ(r, ip) : 0;
	}
	if (has_range && (pc < range_start || pc > range_end)) {
		gb_count(GB_CNT_OUT_OF_RANGE);
		return 0;
	}

	if (want_fp || want_regs || want_kernel) {
		if (emit_stack(ctx, pid_tgid, pc, flags, uctx)) {
			gb_count(GB_CNT_LOST);
			return 0;
		}
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
		bpf_get_current_comm(s->comm, sizeof(s->comm));
		bpf_ringbuf_submit(s, gb_submit_flags());
	}
	gb_count(GB_CNT_KEPT);
	return 0;
}

/* Follow children: a process forked by a sampled one is sampled too
 * (threads share the tgid and need nothing).  Loaded only for a -p or
 * launched scope. */
SEC("raw_tp/sched_process_fork")
int BPF_PROG(gb_follow_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid), ctgid = BPF_CORE_READ(child, tgid);
	__u8 one = 1;

	if (ptgid != ctgid && bpf_map_lookup_elem(&targets, &ptgid)) {
		bpf_map_update_elem(&targets, &ctgid, &one, BPF_ANY);
		/* A forked copy of a Python process has its runtime at the
		 * same address: its frames are read from its first sample
		 * (user space still checks it before naming them). */
		struct gb_py_layout *py = want_python ? bpf_map_lookup_elem(&py_procs, &ptgid) : NULL;
		if (py)
			bpf_map_update_elem(&py_procs, &ctgid, py, BPF_ANY);
	}
	return 0;
}
