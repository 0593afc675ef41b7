/* The ONE contract between gebpf's BPF programs (bpf/NAME.bpf.c) and user space
 * (user/probe/): ring-buffer records, counter slots, limits.  Fixed-width
 * fields only, naturally aligned, so both compilers lay them out the same.
 * See docs/bpf.md.
 */
#ifndef GEBPF_EVENTS_H
#define GEBPF_EVENTS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* The x86-64 base page: the unit of the watcher's ranges (struct gb_ev_prot)
 * and of every page computation in user space (user/common/page.h). */
#define GB_PAGE_SIZE 4096ull

/* Deepest user stack a sample record carries (--folded). */
#define GB_MAX_STACK 127

/* Record kinds (gb_ev_hdr.kind). */
enum gb_ev_kind {
	GB_EV_SAMPLE = 1,        /* struct gb_ev_sample */
	GB_EV_SAMPLE_STACK = 2,  /* struct gb_ev_sample_stack */
	GB_EV_FAULT = 3,         /* struct gb_ev_fault */
	GB_EV_PROT = 4,          /* struct gb_ev_prot */
};

/* Every record starts with this. */
struct gb_ev_hdr {
	__u32 kind;              /* enum gb_ev_kind */
	__u32 tid;               /* thread id (kernel pid) */
	__u64 ns;                /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u32 cpu;               /* CPU the event happened on */
	__u32 tgid;              /* process id */
};

#define GB_SAMPLE_F_KERNEL 1u    /* interrupted in the kernel: pc is the user pc it will return to */

struct gb_ev_sample {
	struct gb_ev_hdr h;
	__u64 pc;                /* user-mode instruction pointer */
	__u32 flags;             /* GB_SAMPLE_F_* */
	__u32 pad;
};

struct gb_ev_sample_stack {
	struct gb_ev_sample s;
	__u64 nframes;           /* valid entries of stack[]; stack[0] is the innermost pc */
	__u64 stack[GB_MAX_STACK];
};

struct gb_ev_fault {
	struct gb_ev_hdr h;
	__u64 addr;              /* faulting data address (CR2) */
	__u64 ip;                /* user ip of the faulting instruction */
	__u64 err;               /* x86 page-fault error code (bit0 present, 1 write, 2 user, 4 fetch) */
};

/* A successful mprotect/pkey_mprotect/munmap/mmap/mremap of the watched
 * process that touched the watched range (bpf/protwatch.bpf.c). */
#define GB_PROT_UNMAPPED (-1)    /* prot: the range is no longer mapped */
#define GB_PROT_REREAD (-2)      /* prot: unknown here (mremap's new range): re-read /proc/PID/maps */

struct gb_ev_prot {
	struct gb_ev_hdr h;
	__u32 nr;                /* syscall number (orig_ax), e.g. 10 = mprotect */
	__s32 prot;              /* PROT_* the range has now, or GB_PROT_UNMAPPED / GB_PROT_REREAD */
	__u64 addr;              /* page-aligned start of the range */
	__u64 len;               /* length, rounded up to whole pages */
};

/* Slots of the per-CPU "counters" array (summed over CPUs by user space).
 * SEEN = KEPT + OTHER + OUT_OF_RANGE + LOST for samples. */
enum gb_counter {
	GB_CNT_SEEN = 0,         /* samples the program ran on (every process, every CPU) */
	GB_CNT_OTHER,            /* dropped in the kernel: another process */
	GB_CNT_OUT_OF_RANGE,     /* dropped in the kernel: user pc outside the range */
	GB_CNT_KEPT,             /* written to the ring buffer */
	GB_CNT_LOST,             /* ring buffer full: sample lost */
	GB_CNT_FAULTS,           /* faults of the target written to the ring buffer */
	GB_CNT_FAULTS_LOST,      /* ring buffer full: fault lost */
	GB_CNT__MAX,
};

#endif
