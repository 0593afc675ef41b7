// SPDX-License-Identifier: GPL-2.0
/* Protection watcher: a process's own mprotect / pkey_mprotect / munmap /
 * mmap / mremap calls that touch a watched address range, for the page trap
 * (user/probe/protwatch.h, docs/bpf.md).  On the exit of every successful
 * such call of the watched process (tgid filter as rodata) whose range
 * overlaps [targ_start, targ_end) it
 *   1. writes one struct gb_ev_prot per touched range to pw_events,
 *   2. adds one to the calling thread's counter in pw_pending,
 *   3. sends the calling thread targ_signo (bpf_send_signal_thread), so the
 *      thread stops for its tracer before it runs another instruction, with
 *      the record already readable and the counter already up.
 * Two attach points, one chosen at run time by user/probe/protwatch.c:
 *   tp_btf/sys_exit   typed BTF tracepoint (kernel BTF present)
 *   raw_tp/sys_exit   raw tracepoint, regs read with bpf_probe_read_kernel
 * Like faults.bpf.c this object has no CO-RE relocations (pt_regs is read at
 * its x86-64 UAPI layout), so the raw program loads on a kernel without BTF.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "gebpf_events.h"

char LICENSE[] SEC("license") = "GPL";

/* The filter, set by user space before load. */
const volatile __u32 targ_tgid = 0;
const volatile __u64 targ_start = 0;
const volatile __u64 targ_end = 0;
const volatile __u32 targ_signo = 0;
/* Return addresses of the tracer's own injected syscalls (not the program's). */
const volatile __u64 skip_ip0 = 0;
const volatile __u64 skip_ip1 = 0;

/* Changes that could not be told precisely (ring buffer full, or no room
 * for the thread's counter): user space turns a rise into a "re-read the
 * whole range" change.  Memory-mapped .bss. */
__u64 lost = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} pw_events SEC(".maps");

/* tid -> signals sent and not yet claimed by the tracer. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} pw_pending SEC(".maps");

/* x86-64 struct pt_regs as the UAPI header lays it out. */
struct gb_x86_regs {
	__u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	__u64 ax, cx, dx, si, di, orig_ax;
	__u64 ip, cs, flags, sp, ss;
};

/* x86-64 syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl). */
#define NR_MMAP 9
#define NR_MPROTECT 10
#define NR_MUNMAP 11
#define NR_MREMAP 25
#define NR_PKEY_MPROTECT 329
#define X32_SYSCALL_BIT 0x40000000ull

#define MREMAP_DONTUNMAP_FLAG 4

struct args {
	__u64 nr, di, si, dx, r10, ip;
};

static __always_inline bool is_err(long ret)
{
	return (unsigned long)ret >= (unsigned long)-4095L;
}

static __always_inline __u64 page_up(__u64 len)
{
	return (len + GB_PAGE_SIZE - 1) & ~(GB_PAGE_SIZE - 1);
}

static __always_inline bool overlaps(__u64 addr, __u64 len)
{
	return len && addr < targ_end && addr + len > targ_start;
}

static __always_inline int emit(__u64 pid_tgid, __u32 nr, __u64 addr, __u64 len, int prot)
{
	struct gb_ev_prot *e = bpf_ringbuf_reserve(&pw_events, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&lost, 1);
		return 0;
	}
	e->h.kind = GB_EV_PROT;
	e->h.tid = (__u32)pid_tgid;
	e->h.tgid = pid_tgid >> 32;
	e->h.ns = bpf_ktime_get_ns();
	e->h.cpu = bpf_get_smp_processor_id();
	e->nr = nr;
	e->prot = prot;
	e->addr = addr;
	e->len = len;
	bpf_ringbuf_submit(e, 0);
	return 1;
}

/* The records are written: count the signal, then send it. */
static __always_inline void count_and_signal(__u64 pid_tgid)
{
	__u32 tid = (__u32)pid_tgid;
	__u64 one = 1, *v;

	v = bpf_map_lookup_elem(&pw_pending, &tid);
	if (v) {
		__sync_fetch_and_add(v, 1);
	} else if (bpf_map_update_elem(&pw_pending, &tid, &one, BPF_NOEXIST)) {
		/* No room for this thread: an unclaimable signal would reach
		 * the program, so send none; the drain reports a re-read. */
		__sync_fetch_and_add(&lost, 1);
		return;
	}
	bpf_send_signal_thread(targ_signo);
}

static __always_inline int pw_on_exit(const struct args *a, long ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 nr = (__u32)(a->nr & ~X32_SYSCALL_BIT);
	bool hit = false;
	__u64 len;

	if (a->ip == skip_ip0 || a->ip == skip_ip1)
		return 0; /* gebpf's own page-trap mprotect */

	switch (nr) {
	case NR_MPROTECT:
	case NR_PKEY_MPROTECT:
		if (ret != 0)
			return 0;
		len = page_up(a->si);
		if (overlaps(a->di, len)) {
			emit(pid_tgid, nr, a->di, len, (int)a->dx);
			hit = true;
		}
		break;
	case NR_MUNMAP:
		if (ret != 0)
			return 0;
		len = page_up(a->si);
		if (overlaps(a->di, len)) {
			emit(pid_tgid, nr, a->di, len, GB_PROT_UNMAPPED);
			hit = true;
		}
		break;
	case NR_MMAP:
		if (is_err(ret))
			return 0;
		len = page_up(a->si);
		if (overlaps((__u64)ret, len)) {
			emit(pid_tgid, nr, (__u64)ret, len, (int)a->dx);
			hit = true;
		}
		break;
	case NR_MREMAP:
		if (is_err(ret))
			return 0;
		/* The old range is gone, unless MREMAP_DONTUNMAP kept it
		 * mapped (emptied, same protections): re-read it then. */
		len = page_up(a->si);
		if (overlaps(a->di, len)) {
			emit(pid_tgid, nr, a->di, len,
			     (a->r10 & MREMAP_DONTUNMAP_FLAG) ? GB_PROT_REREAD : GB_PROT_UNMAPPED);
			hit = true;
		}
		/* The new range has the old mapping's protections, which
		 * this program does not know. */
		len = page_up(a->dx);
		if (overlaps((__u64)ret, len)) {
			emit(pid_tgid, nr, (__u64)ret, len, GB_PROT_REREAD);
			hit = true;
		}
		break;
	default:
		return 0;
	}
	if (hit)
		count_and_signal(pid_tgid);
	return 0;
}

static __always_inline bool ours(void)
{
	return (bpf_get_current_pid_tgid() >> 32) == targ_tgid;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(gb_prot_btf, struct pt_regs *regs, long ret)
{
	/* A typed pointer: the verifier checks these loads against kernel BTF. */
	struct gb_x86_regs *r = (struct gb_x86_regs *)regs;
	struct args a;

	if (!ours())
		return 0;
	a.nr = r->orig_ax;
	a.di = r->di;
	a.si = r->si;
	a.dx = r->dx;
	a.r10 = r->r10;
	a.ip = r->ip;
	return pw_on_exit(&a, ret);
}

SEC("raw_tp/sys_exit")
int BPF_PROG(gb_prot_raw, struct pt_regs *regs, long ret)
{
	struct gb_x86_regs *r = (struct gb_x86_regs *)regs;
	struct args a = {};

	if (!ours())
		return 0;
	bpf_probe_read_kernel(&a.nr, sizeof(a.nr), &r->orig_ax);
	bpf_probe_read_kernel(&a.di, sizeof(a.di), &r->di);
	bpf_probe_read_kernel(&a.si, sizeof(a.si), &r->si);
	bpf_probe_read_kernel(&a.dx, sizeof(a.dx), &r->dx);
	bpf_probe_read_kernel(&a.r10, sizeof(a.r10), &r->r10);
	bpf_probe_read_kernel(&a.ip, sizeof(a.ip), &r->ip);
	return pw_on_exit(&a, ret);
}
