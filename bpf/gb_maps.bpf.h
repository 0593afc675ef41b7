/* Maps and helpers every gebpf BPF object shares (BPF side only).  The
 * sampler and the fault capture declare the same "events" ring buffer and
 * "counters" array, so user space can make one object reuse the other's maps
 * (bpf_map__reuse_fd) and read one ring buffer.  Record layouts and counter
 * slots: gebpf_events.h.
 */
#ifndef GB_MAPS_BPF_H
#define GB_MAPS_BPF_H

#include "gebpf_events.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);        /* user space resizes before load */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GB_CNT__MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Wake the consumer only once this many bytes are pending (0: on every
 * record).  Consumers that poll with a timeout or drain synchronously set it
 * to save a wake-up per record. */
const volatile __u64 wakeup_bytes = 0;

/* 0 while a launched command has not exec'd yet: its events until then
 * belong to the forked copy of gebpf, not to the command.  User space sets
 * it (memory-mapped .data) once the exec happened.  Counted as "other". */
__u32 armed SEC(".data") = 1;

static __always_inline void gb_count(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &slot);
	if (v)
		*v += 1;
}

static __always_inline __u64 gb_submit_flags(void)
{
	if (!wakeup_bytes)
		return 0;
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ?
		BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

static __always_inline void gb_fill_hdr(struct gb_ev_hdr *h, __u32 kind, __u64 pid_tgid)
{
	h->kind = kind;
	h->tid = (__u32)pid_tgid;
	h->tgid = pid_tgid >> 32;
	h->ns = bpf_ktime_get_ns();
	h->cpu = bpf_get_smp_processor_id();
}

#endif
