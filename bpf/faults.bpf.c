// SPDX-License-Identifier: GPL-2.0
/* Page-fault capture: user-mode page faults of one process (tgid filter as
 * rodata) into the shared ring buffer.  Two attach points, one chosen at run
 * time by user/probe/faults.c:
 *   tp_btf/page_fault_user   typed BTF tracepoint (kernel BTF present)
 *   raw_tp/page_fault_user   raw tracepoint (the exceptions:page_fault_user
 *                            event) for kernels without BTF
 * Both get (address, regs, error_code).  This object deliberately has no
 * CO-RE relocations, so it loads on a kernel without BTF: the user ip is
 * read at its x86-64 UAPI offset in struct pt_regs (struct gb_user_regs in
 * gebpf_events.h, a fixed ABI shared with ptrace's user_regs_struct).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "gb_maps.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Process whose faults are recorded (0: every process). */
const volatile __u32 targ_tgid = 0;

static __always_inline int record(__u64 address, __u64 ip, __u64 error_code)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct gb_ev_fault *e;

	if ((targ_tgid && (pid_tgid >> 32) != targ_tgid) || !armed)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		gb_count(GB_CNT_FAULTS_LOST);
		return 0;
	}
	gb_fill_hdr(&e->h, GB_EV_FAULT, pid_tgid);
	e->addr = address;
	e->ip = ip;
	e->err = error_code;
	bpf_ringbuf_submit(e, gb_submit_flags());
	gb_count(GB_CNT_FAULTS);
	return 0;
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(gb_fault_btf, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	/* A typed pointer: the verifier checks this load against kernel BTF. */
	return record(address, ((struct gb_user_regs *)regs)->ip, error_code);
}

SEC("raw_tp/page_fault_user")
int BPF_PROG(gb_fault_raw, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	__u64 ip = 0;

	bpf_probe_read_kernel(&ip, sizeof(ip), &((struct gb_user_regs *)regs)->ip);
	return record(address, ip, error_code);
}
