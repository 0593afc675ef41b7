/* Page-fault capture for one process (BPF, bpf/faults.bpf.c).
 *
 * Records every user-mode page fault of the process's threads (the tgid
 * filter runs in the kernel) with its thread, data address, instruction
 * pointer, x86 error code and CLOCK_MONOTONIC time, into a BPF ring buffer.
 * The kernel writes the record in the fault path, before the faulting
 * instruction completes and long before it returns to user space; so once
 * a tracer has seen the single-step stop of an instruction, one
 * gb_faults__drain() delivers every fault that instruction took.
 *
 *   struct gb_faults_opts o = { .tgid = pid };
 *   struct gb_faults *f = gb_faults__new(&o);   // probe features, load
 *   gb_faults__start(f);                        // attach: recording from here
 *   ... after each step:  gb_faults__drain(f, on_fault, ctx);
 *   gb_faults__stop(f);  gb_faults__drain(f, on_fault, ctx);   // the rest
 *   gb_faults__free(f);                         // always unloads
 *
 * Only faults taken by the process's own instructions are seen: memory the
 * kernel touches on its behalf (a read() into a fresh buffer) faults in
 * kernel mode and is not an instruction access.  Needs root (CAP_BPF +
 * CAP_PERFMON).  Attach point: tp_btf/page_fault_user, or the raw
 * tracepoint page_fault_user where the kernel has no BTF (docs/bpf.md).
 */
#ifndef GB_PROBE_FAULTS_H
#define GB_PROBE_FAULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct gb_fault {
	pid_t tid;          /* faulting thread */
	uint32_t cpu;       /* CPU it faulted on */
	uint64_t addr;      /* data address (CR2) */
	uint64_t ip;        /* user ip of the faulting instruction */
	uint64_t err;       /* x86 error code: bit0 present, bit1 write, bit2 user, bit4 fetch */
	uint64_t ns;        /* CLOCK_MONOTONIC nanoseconds (bpf_ktime_get_ns) */
};

/* Called once per fault, in ring-buffer order (the order the faults were
 * recorded in).  A negative return (-errno) stops the drain/poll, which then
 * returns that value; the fault is consumed either way. */
typedef int (*gb_fault_cb)(void *ctx, const struct gb_fault *f);

struct gb_faults_opts {
	pid_t tgid;               /* process to watch (required) */
	size_t ringbuf_bytes;     /* ring buffer size, power of 2 (0: 4 MiB) */
	size_t wakeup_bytes;      /* wake a poller only once this much is pending
				   * (0: on every fault; drains never need a wake-up) */
	/* Record nothing until gb_faults__arm() (a launched command: its
	 * faults before exec are the forked copy of the launcher's). */
	bool wait_exec;
	/* Share another gebpf object's "events" ring buffer and "counters"
	 * map instead of owning them (the sampler does this for --faults);
	 * the owner then reads the records (gb_fault_from_record). */
	bool share;
	int events_fd, counters_fd;
};

struct gb_faults_stats {
	uint64_t recorded;        /* faults written to the ring buffer */
	uint64_t lost;            /* faults lost because the ring buffer was full */
};

struct gb_faults;

/* Probe, open and load.  NULL with a "gebpf: ..." line printed on failure. */
struct gb_faults *gb_faults__new(const struct gb_faults_opts *o);
/* Attach: faults are recorded from here on.  0 or -errno (line printed). */
int gb_faults__start(struct gb_faults *f);
/* Start recording faults of a wait_exec capture (no-op otherwise). */
void gb_faults__arm(struct gb_faults *f);
/* Detach (stop recording).  Pending records stay readable.  Idempotent. */
void gb_faults__stop(struct gb_faults *f);
/* Deliver every fault pending now; never blocks.  Returns how many were
 * delivered, or -errno, or the callback's negative value. */
int gb_faults__drain(struct gb_faults *f, gb_fault_cb cb, void *ctx);
void gb_faults__stats(const struct gb_faults *f, struct gb_faults_stats *st);
/* Stop and unload everything (programs, links, maps).  NULL is fine. */
void gb_faults__free(struct gb_faults *f);

/* Decode a ring-buffer record into *out.  true if it is a fault record. */
bool gb_fault_from_record(const void *data, size_t len, struct gb_fault *out);

#endif
