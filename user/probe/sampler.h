/* Range-filtered sampling of one process (BPF, bpf/sample.bpf.c).
 *
 * One perf event per CPU (cpu-clock by default where there is no hardware
 * PMU, cycles where there is; see features.h) runs a BPF program on every
 * sample.  In the kernel it drops samples of other processes (tgid filter)
 * and samples whose user pc is outside the range, and sends the rest to a
 * ring buffer: the target is never stopped, and threads it creates are
 * followed because they share its tgid, and processes it forks are added
 * to the scope in the kernel.  Optionally each sample carries the user
 * stack (frame pointers, or registers and stack bytes for DWARF unwinding)
 * and the kernel stack, and the process's page faults go into the same ring
 * buffer (faults.h).
 *
 *   struct gb_sampler *s = gb_sampler__new(&opts);   // probe, load
 *   gb_sampler__start(s);                            // perf events + attach
 *   while (...) { poll(gb_sampler__fd(s)...); gb_sampler__drain(s, &cbs); }
 *   gb_sampler__stop(s); gb_sampler__drain(s, &cbs); // detach, then the rest
 *   gb_sampler__stats(s, &st);
 *   gb_sampler__free(s);                             // always unloads
 *
 * Every sample the program sees is counted once: kept, dropped for another
 * process, dropped out of range, or lost because the ring buffer was full.
 */
#ifndef GB_PROBE_SAMPLER_H
#define GB_PROBE_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gebpf_events.h"
#include "probe/faults.h"

/* How a sample's user stack is captured. */
enum gb_stack_mode {
	GB_STACK_NONE = 0,
	GB_STACK_FP,               /* frame pointers, walked in the kernel (bpf_get_stack) */
	GB_STACK_DWARF,            /* registers + a copy of the stack top, unwound by user/unwind */
};

/* Valid during the callback only: the pointers point into the ring buffer. */
struct gb_sample {
	pid_t tid, pid;
	const char *comm;          /* the thread's name */
	uint32_t cpu;              /* CPU the sample was taken on */
	uint64_t pc;               /* user pc (when in_kernel: where the thread returns to) */
	uint64_t ns;               /* CLOCK_MONOTONIC nanoseconds */
	bool in_kernel;            /* the thread was in the kernel (syscall, fault, irq) */
	const uint64_t *ustack;    /* GB_STACK_FP: user return addresses, innermost first */
	uint32_t nuser;
	const uint64_t *kstack;    /* opts.kernel and in_kernel: kernel stack, innermost first */
	uint32_t nkernel;
	const struct gb_user_regs *regs;   /* GB_STACK_DWARF: user registers (NULL if unreadable) */
	const uint8_t *stack;      /* GB_STACK_DWARF: stack_len bytes copied from regs->sp */
	uint64_t stack_len;
	const struct gb_py_frame *py;  /* opts.python: the thread's CPython frames, innermost first */
	uint32_t npy;
	uint32_t pystate;          /* GB_PYSTATE_* */
};

/* Negative returns stop the drain, which returns that value. */
struct gb_sampler_cbs {
	int (*sample)(void *ctx, const struct gb_sample *s);
	int (*fault)(void *ctx, const struct gb_fault *f);   /* with opts.faults */
	void *ctx;
};

struct gb_sampler_opts {
	/* Scope: exactly one of these. */
	const pid_t *pids;         /* these processes and the processes they fork */
	size_t npids;
	bool all;                  /* every process but gebpf itself */
	uint64_t cgroup_id;        /* the processes of one cgroup (v2 id) */

	const char *event;         /* perf event name; NULL: gb_perf_event_default() */
	uint64_t hz;               /* samples per second per CPU (0: 999) */
	bool has_range;            /* keep only samples with start <= pc <= end */
	uint64_t start, end;       /* inclusive; start > end: empty until set_range */
	enum gb_stack_mode stacks;
	bool kernel;               /* kernel stacks of samples taken in the kernel */
	uint32_t stack_size;       /* GB_STACK_DWARF: bytes copied (0: 8192; multiple of 8) */
	bool faults;               /* also capture page faults (one process only) */
	bool python;               /* with stacks: read the CPython frames of the processes
				    * registered with gb_sampler__add_python() */
	bool wait_exec;            /* keep nothing until gb_sampler__arm() (a launched
				    * command that has not exec'd yet) */
	size_t ringbuf_bytes;      /* power of 2 (0: 4 MiB, 32 MiB with stacks) */
};

struct gb_sampler_stats {
	uint64_t seen;             /* samples the BPF program ran on (every process) */
	uint64_t kept;             /* written to the ring buffer */
	uint64_t other;            /* dropped in the kernel: another process (or not armed) */
	uint64_t out_of_range;     /* dropped in the kernel: pc outside the range */
	uint64_t lost;             /* ring buffer full */
	uint64_t faults;           /* faults recorded */
	uint64_t faults_lost;      /* faults lost (ring buffer full) */
};

struct gb_sampler;

/* Probe the event and kernel features, open and load.  NULL with a
 * "gebpf: ..." line printed on failure (unsupported event, rate above
 * kernel.perf_event_max_sample_rate, no permission, ...). */
struct gb_sampler *gb_sampler__new(const struct gb_sampler_opts *o);
/* Set the range of a sampler made with has_range (e.g. once a symbol of a
 * just-launched command is resolved).  Takes effect immediately. */
void gb_sampler__set_range(struct gb_sampler *s, uint64_t start, uint64_t end);
/* Read the CPython frames of process pid's samples from now on, with
 * layout l (opts.python).  0 or -errno. */
int gb_sampler__add_python(struct gb_sampler *s, pid_t pid, const struct gb_py_layout *l);
/* Stop reading them (a layout that failed its check). */
void gb_sampler__del_python(struct gb_sampler *s, pid_t pid);
/* Start keeping samples (and faults) of a wait_exec sampler. */
void gb_sampler__arm(struct gb_sampler *s);
/* Open one perf event per online CPU and attach.  0 or -errno (printed). */
int gb_sampler__start(struct gb_sampler *s);
/* Detach and close the perf events (and stop fault capture).  Records
 * already in the ring buffer stay readable.  Idempotent. */
void gb_sampler__stop(struct gb_sampler *s);
/* Deliver everything pending now without blocking. */
int gb_sampler__drain(struct gb_sampler *s, const struct gb_sampler_cbs *cbs);
/* Readable when records are pending (poll it with other descriptors). */
int gb_sampler__fd(const struct gb_sampler *s);
void gb_sampler__stats(const struct gb_sampler *s, struct gb_sampler_stats *st);
const char *gb_sampler__event(const struct gb_sampler *s);   /* "cpu-clock", ... */
uint64_t gb_sampler__hz(const struct gb_sampler *s);
/* Stop and unload everything.  NULL is fine. */
void gb_sampler__free(struct gb_sampler *s);

#endif
