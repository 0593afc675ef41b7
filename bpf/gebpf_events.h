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

/* Deepest frame-pointer user stack and kernel stack a sample record
 * carries, and the largest copy of the user stack for DWARF unwinding
 * (--stack-size; a multiple of 8). */
#define GB_MAX_STACK 127
#define GB_MAX_KSTACK 127
#define GB_MAX_STACK_BYTES 65536
#define GB_COMM_LEN 16
/* Deepest Python frame chain a sample record carries (bpf/pyframes.bpf.h),
 * and the most thread states searched for the sampled thread. */
#define GB_MAX_PYFRAMES 128
#define GB_MAX_PYTHREADS 64

/* Record kinds (gb_ev_hdr.kind). */
enum gb_ev_kind {
	GB_EV_SAMPLE = 1,        /* struct gb_ev_sample */
	GB_EV_SAMPLE_STACK = 2,  /* struct gb_ev_sample_stack */
	GB_EV_FAULT = 3,         /* struct gb_ev_fault */
	GB_EV_PROT = 4,          /* struct gb_ev_prot */
	GB_EV_PROBE = 5,         /* struct gb_ev_probe */
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
#define GB_SAMPLE_F_REGS 2u      /* gb_ev_sample_stack.uregs holds the user registers */

struct gb_ev_sample {
	struct gb_ev_hdr h;
	__u64 pc;                /* user-mode instruction pointer */
	__u32 flags;             /* GB_SAMPLE_F_* */
	__u32 pad;
	char comm[GB_COMM_LEN];  /* the thread's name */
};

/* x86-64 user registers in the UAPI struct pt_regs order (asm/ptrace.h). */
struct gb_user_regs {
	__u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	__u64 ax, cx, dx, si, di, orig_ax;
	__u64 ip, cs, flags, sp, ss;
};

/* One CPython frame (struct _PyInterpreterFrame) of a sampled thread, read
 * by bpf/pyframes.bpf.h; named in user space (user/sample/pycode.c). */
#define GB_PYFRAME_F_ENTRY 1u    /* is_entry: the first frame a C call of
				  * _PyEval_EvalFrameDefault runs (3.11) */
#define GB_PYFRAME_F_SHIM 2u     /* owned by the C stack (3.12 on): the shim
				  * below such a first frame, not a Python
				  * function's */
struct gb_py_frame {
	__u64 code;              /* f_code: the PyCodeObject's address */
	__s32 lasti;             /* index of prev_instr in co_code_adaptive (code units; -1: not started) */
	__u32 flags;             /* GB_PYFRAME_F_* */
};

/* gb_ev_sample_stack.pystate: what the Python frame reader found. */
#define GB_PYSTATE_PYTHON 1u     /* the process is registered as Python (py_procs) */
#define GB_PYSTATE_THREAD 2u     /* the thread's PyThreadState was found */
#define GB_PYSTATE_DEEP 4u       /* the chain went on past GB_MAX_PYFRAMES */

/* Value of the sampler's "py_procs" map (key: tgid): where the interpreter
 * of a Python process keeps its thread states and frames.  Run-time
 * address of _PyRuntime, and byte offsets from the CPython version's
 * structs (user/sample/pyruntime.c fills it, after checking it against
 * the live process). */
/* cframe_current when the thread state points at its frame itself (3.13 on:
 * ts_cframe is then PyThreadState.current_frame). */
#define GB_PY_FRAME_DIRECT 0xffffffffu

struct gb_py_layout {
	__u64 runtime;           /* &_PyRuntime */
	__u32 tstate_current;    /* _PyRuntimeState.gilstate.tstate_current (3.11; 0:
				  * none, the current one is a C thread-local) */
	__u32 interp_head;       /* _PyRuntimeState.interpreters.head */
	__u32 threads_head;      /* PyInterpreterState.threads.head */
	__u32 ts_next;           /* PyThreadState.next */
	__u32 ts_native_tid;     /* PyThreadState.native_thread_id */
	__u32 ts_cframe;         /* PyThreadState.cframe (3.11, 3.12), .current_frame (3.13 on) */
	__u32 cframe_current;    /* _PyCFrame.current_frame, or GB_PY_FRAME_DIRECT */
	__u32 frame_code;        /* _PyInterpreterFrame.f_code (.f_executable in 3.13 on) */
	__u32 frame_previous;    /* _PyInterpreterFrame.previous */
	__u32 frame_prev_instr;  /* _PyInterpreterFrame.prev_instr (.instr_ptr in 3.13 on) */
	__u32 frame_is_entry;    /* _PyInterpreterFrame.is_entry (a bool; 3.11) */
	__u32 code_adaptive;     /* PyCodeObject.co_code_adaptive */
	__u32 frame_owner;       /* _PyInterpreterFrame.owner (a byte; 3.12 on, else 0):
				  * a frame owned by the C stack is the shim each
				  * _PyEval_EvalFrameDefault pushes below its first
				  * frame, which is then the entry */
	__u32 owner_cstack;      /* FRAME_OWNED_BY_CSTACK */
};

/* A sample with stacks.  Variable length: the record ends after
 * stack_len bytes of stack[] (bytes copied from user address uregs.sp). */
struct gb_ev_sample_stack {
	struct gb_ev_sample s;
	__u32 nuser;             /* valid entries of ustack[] (frame pointers; [0] innermost) */
	__u32 nkernel;           /* valid entries of kstack[] ([0] innermost) */
	struct gb_user_regs uregs;   /* with GB_SAMPLE_F_REGS */
	__u64 kstack[GB_MAX_KSTACK];
	__u64 ustack[GB_MAX_STACK];
	__u32 npy;               /* valid entries of py[] ([0] innermost) */
	__u32 pystate;           /* GB_PYSTATE_* (0: not a Python process, or not asked) */
	struct gb_py_frame py[GB_MAX_PYFRAMES];
	__u64 stack_len;         /* bytes of stack[] that follow */
	__u8 stack[GB_MAX_STACK_BYTES];
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

/* A uprobe hit of the probe trap (bpf/probetrap.bpf.c): the user registers
 * the program saw, i.e. the state BEFORE the probed instruction (ip is the
 * probe's address).  Field order: the x86-64 struct pt_regs (asm/ptrace.h,
 * also ptrace's user_regs_struct up to ss). */
#define GB_PROBE_F_SIGSTOP 1u    /* signo was blocked by the thread: SIGSTOP sent instead */
#define GB_PROBE_F_NOSIGNAL 2u   /* no room to count the signal: none sent (the thread ran on) */
#define GB_PROBE_F_ALT 4u        /* signo was blocked or pending: alt_signo sent instead */

struct gb_ev_probe {
	struct gb_ev_hdr h;
	__u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	__u64 ax, cx, dx, si, di, orig_ax;
	__u64 ip, cs, flags, sp, ss;
	__u32 signo;             /* the signal sent (0 with GB_PROBE_F_NOSIGNAL) */
	__u32 pflags;            /* GB_PROBE_F_* */
	__u64 blocked;           /* the thread's blocked mask (task->blocked, signals 1..64) */
};

/* Slots of the probe trap's own "pt_counters" array (summed over CPUs). */
enum gb_probe_counter {
	GB_PCNT_HITS = 0,        /* probe hits of the traced process (any thread) */
	GB_PCNT_STEPPING,        /* of those: by a thread in "stepping" (nothing done) */
	GB_PCNT_RECORDS,         /* records written */
	GB_PCNT_LOST,            /* ring buffer full: record lost (the signal is still sent) */
	GB_PCNT_SIGNALS,         /* signals sent (signo or SIGSTOP) */
	GB_PCNT_SIGSTOP,         /* of those: SIGSTOP because signo and alt_signo were blocked or pending */
	GB_PCNT_NOSIGNAL,        /* hits that sent no signal (no room in pt_pending) */
	GB_PCNT_OTHER,           /* hits of another process (the file's other users) */
	GB_PCNT_MUTED,           /* hits of removed probes still installed (uprobe_multi) */
	GB_PCNT_REDIRECTS,       /* hits sent on at another address (ip written: no record, no signal) */
	GB_PCNT_DISARMED,        /* hits of the traced process once disarmed (nothing done) */
	GB_PCNT_ALT,             /* signals sent: alt_signo because signo was blocked or pending */
	GB_PCNT__MAX,
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
