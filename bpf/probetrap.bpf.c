// SPDX-License-Identifier: GPL-2.0
/* Probe trap: one uprobe program attached to many uprobes (one per entry
 * address of a traced range), for one process (rodata tgid).  On a hit by a
 * thread gebpf is not already single-stepping (map "stepping") it
 *   1. writes one struct gb_ev_probe to pt_events: the user registers as the
 *      program sees them, i.e. BEFORE the probed instruction (ip == the
 *      probe's address),
 *   2. counts the signal in pt_pending[tid] (which signal: signo, alt_signo
 *      or SIGSTOP),
 *   3. stops the thread with bpf_send_signal_thread(signo); when the thread
 *      blocks signo or already has it pending (a blocked signal would stay
 *      pending while the thread ran on through the range; a second pending
 *      standard signal would merge with the first), with alt_signo if it
 *      neither blocks nor has that one pending, else SIGSTOP.  signo and
 *      alt_signo (SIGURG, SIGWINCH) are ignored by default: one left
 *      undelivered when gebpf dies reaches a program that ignores it, where
 *      a SIGSTOP would stop the whole process (a Go service, whose runtime
 *      keeps SIGURG pending for its preemption, met that fallback at most
 *      hits).
 * With rodata redirect (set only where the kernel lets a uprobe program
 * write its registers: Linux 6.18, "bpf: Allow uprobe program to change
 * context registers"), a hit at an address of pt_redirect by a thread of
 * pt_known, while bss redirect_on, does none of that: it sets ip to the
 * address's target (the patch trap's entry block in its code cache) and the
 * kernel then neither steps nor emulates the probed instruction ("uprobe:
 * Do not emulate/sstep original instruction when ip is changed"): the
 * thread goes on there, without a stop.
 * API and the engine's contract: user/probe/probetrap.h; docs/bpf.md.
 * CO-RE: task->blocked and task->pending are read with BPF_CORE_READ from
 * bpf_get_current_task() (Linux 5.10 has no bpf_get_current_task_btf for
 * this program type); bpf cookies only with uprobe_multi (6.10+, rodata
 * has_cookie), so the object loads on 5.10.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "gebpf_events.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by user space before load. */
const volatile __u32 tgid = 0;
const volatile __u32 signo = 23;        /* SIGURG */
const volatile __u32 alt_signo = 28;    /* SIGWINCH (0: none) */
/* Attached as uprobe_multi links (Linux 6.10+), whose cookies are probe ids:
 * only then is bpf_get_attach_cookie called (the verifier drops the call
 * on older kernels, where the flag is false). */
const volatile bool has_cookie = false;
/* Redirects (above) may be made: the ctx write is only in code the
 * verifier visits when this is true (older kernels refuse it). */
const volatile bool redirect = false;

#define GB_SIGSTOP 19

/* Set by user space (memory-mapped .bss) before it detaches the probes:
 * each detach waits for the kernel's grace periods, and hits meanwhile
 * must not signal a thread whose tracer is gone. */
__u32 disarmed = 0;
/* Set by user space while the targets of pt_redirect are in place (the
 * patch trap's cache mapped, its areas given). */
__u32 redirect_on = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} pt_events SEC(".maps");

/* The hash maps are allocated as they fill, not preallocated: a
 * preallocated 16384-entry map costs its every entry at each load (with
 * the kernel's BTF, most of a short trace's CPU; docs/trace.md "Start-up
 * cost"), and these hold a few entries. */

/* tid -> signals sent and not yet claimed, per kind. */
struct gb_pt_pending {
	__u32 sig;       /* signo */
	__u32 stop;      /* SIGSTOP */
	__u32 alt;       /* alt_signo */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct gb_pt_pending);
} pt_pending SEC(".maps");

/* tid -> 1: threads gebpf single-steps; their hits do nothing. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, __u8);
} stepping SEC(".maps");

/* probe id (cookie) -> 1: removed probes whose int3 is still installed
 * (a uprobe_multi link is detached whole, when all its probes are gone). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, __u8);
} muted SEC(".maps");

/* probe's run-time address -> where a redirected thread goes on. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC); /* (empty without redirects: no load cost) */
	__type(key, __u64);
	__type(value, __u64);
} pt_redirect SEC(".maps");

/* tid -> 1: threads that may be redirected (the patch trap's threads with
 * an area of the cache: gs base set). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, __u8);
} pt_known SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GB_PCNT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} pt_counters SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&pt_counters, &slot);
	if (v)
		*v += 1;
}

static __always_inline bool sig_in(__u64 mask, __u32 sig)
{
	return sig >= 1 && sig <= 64 && (mask & (1ull << (sig - 1)));
}

/* Count the signal about to be sent; false if there is no room (then none
 * may be sent: the tracer could not tell it from the program's own). */
enum { K_SIG, K_ALT, K_STOP };

static __always_inline bool count_pending(__u32 tid, int kind)
{
	struct gb_pt_pending one = { .sig = kind == K_SIG, .stop = kind == K_STOP,
				     .alt = kind == K_ALT }, *v;

	v = bpf_map_lookup_elem(&pt_pending, &tid);
	if (v) {
		if (kind == K_STOP)
			__sync_fetch_and_add(&v->stop, 1);
		else if (kind == K_ALT)
			__sync_fetch_and_add(&v->alt, 1);
		else
			__sync_fetch_and_add(&v->sig, 1);
		return true;
	}
	return bpf_map_update_elem(&pt_pending, &tid, &one, BPF_NOEXIST) == 0;
}

SEC("uprobe")
int gb_probe_hit(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	struct task_struct *task;
	struct gb_ev_probe *e;
	__u64 blocked, pending;
	__u32 sig = signo, pflags = 0;

	if (disarmed) {
		if ((pid_tgid >> 32) == tgid)
			count(GB_PCNT_DISARMED);
		return 0;
	}
	if ((pid_tgid >> 32) != tgid) {
		count(GB_PCNT_OTHER);
		return 0;
	}
	if (has_cookie) {
		__u64 id = bpf_get_attach_cookie(ctx);
		if (bpf_map_lookup_elem(&muted, &id)) {
			count(GB_PCNT_MUTED);
			return 0;
		}
	}
	count(GB_PCNT_HITS);
	if (bpf_map_lookup_elem(&stepping, &tid)) {
		count(GB_PCNT_STEPPING);
		return 0;
	}
	if (redirect && redirect_on) {
		__u64 at = ctx->ip, *to = bpf_map_lookup_elem(&pt_redirect, &at);
		if (to && bpf_map_lookup_elem(&pt_known, &tid)) {
			ctx->ip = *to;
			count(GB_PCNT_REDIRECTS);
			return 0;
		}
	}
	task = (struct task_struct *)bpf_get_current_task();
	blocked = BPF_CORE_READ(task, blocked.sig[0]);
	pending = BPF_CORE_READ(task, pending.signal.sig[0]);
	if (sig_in(blocked, sig) || sig_in(pending, sig)) {
		if (alt_signo && !sig_in(blocked, alt_signo) && !sig_in(pending, alt_signo)) {
			sig = alt_signo;
			pflags |= GB_PROBE_F_ALT;
		} else {
			sig = GB_SIGSTOP;
			pflags |= GB_PROBE_F_SIGSTOP;
		}
	}
	if (!count_pending(tid, sig == GB_SIGSTOP ? K_STOP : sig == signo ? K_SIG : K_ALT)) {
		pflags |= GB_PROBE_F_NOSIGNAL;
		sig = 0;
	}

	e = bpf_ringbuf_reserve(&pt_events, sizeof(*e), 0);
	if (e) {
		e->h.kind = GB_EV_PROBE;
		e->h.tid = tid;
		e->h.tgid = pid_tgid >> 32;
		e->h.ns = bpf_ktime_get_ns();
		e->h.cpu = bpf_get_smp_processor_id();
		e->r15 = ctx->r15;
		e->r14 = ctx->r14;
		e->r13 = ctx->r13;
		e->r12 = ctx->r12;
		e->bp = ctx->bp;
		e->bx = ctx->bx;
		e->r11 = ctx->r11;
		e->r10 = ctx->r10;
		e->r9 = ctx->r9;
		e->r8 = ctx->r8;
		e->ax = ctx->ax;
		e->cx = ctx->cx;
		e->dx = ctx->dx;
		e->si = ctx->si;
		e->di = ctx->di;
		e->orig_ax = ctx->orig_ax;
		e->ip = ctx->ip;
		e->cs = ctx->cs;
		e->flags = ctx->flags;
		e->sp = ctx->sp;
		e->ss = ctx->ss;
		e->signo = sig;
		e->pflags = pflags;
		e->blocked = blocked;
		bpf_ringbuf_submit(e, 0);
		count(GB_PCNT_RECORDS);
	} else {
		count(GB_PCNT_LOST);
	}
	if (!sig) {
		count(GB_PCNT_NOSIGNAL);
		return 0;
	}
	/* The kernel delivers it after the probed instruction ran (stepped
	 * out of line or emulated): the thread stops at the next one. */
	bpf_send_signal_thread(sig);
	count(GB_PCNT_SIGNALS);
	if (sig == GB_SIGSTOP)
		count(GB_PCNT_SIGSTOP);
	else if (sig != signo)
		count(GB_PCNT_ALT);
	return 0;
}
