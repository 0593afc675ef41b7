/* Engine internals shared by engine.c (the loop), estep.c (one step) and
 * ethreads.c (thread and process events).  Not for other rooms. */
#ifndef GB_TRACE_ENGINE_INT_H
#define GB_TRACE_ENGINE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "ptrace/wait.h"
#include "trace/engine.h"
#include "trace/icache.h"
#include "trace/pagetrap.h"
#include "trace/probes.h"
#include "trace/progress.h"

enum tstate {
	T_STOPPED,   /* in a ptrace-stop, ours to step or resume */
	T_NATIVE,    /* running natively (PTRACE_CONT), entry trap armed */
	T_SYSCALL,   /* inside a syscall (PTRACE_SYSCALL to its exit stop) */
	T_DYING,     /* could not be resumed or read: its exit is on its way */
	T_GROUP,     /* in a group-stop (PTRACE_LISTEN) */
	T_JIT,       /* the owner, running translated code (ejit.c waits for it) */
	T_GONE,
};

struct ethread {
	int vcpu;            /* -1 until its first in-range instruction */
	enum tstate state;
	bool want_entry;     /* stopped at the range's entry, waiting to own it */
	bool has_hit;        /* want_entry through a probe: hit's instruction ran
			      * natively and is emitted when the thread gets the range */
	struct gb_probe_hit hit;
	bool fault_seen;     /* probe trap: a synchronous fault signal stopped the
			      * thread natively at fault_pc (a probed instruction
			      * that faults raises it before the probe's stop) */
	uint64_t fault_pc;
	struct gb_stop fault;
	bool in_handler;     /* probe trap: the owner runs a signal handler that
			      * interrupted the range: it stays owner (stepped,
			      * not emitted) until it is back at handler_ret */
	uint64_t handler_ret;
	uint32_t handler_steps;
	bool last_in_range;  /* as owner: its previous step was in the range */
	uint32_t out_steps;  /* as owner: consecutive out-of-range steps on the pages */
	uint64_t stale_pc;   /* pc of an entry fault already dropped once (0: none) */
};

/* Out-of-range steps on the range's pages after which an owner yields to the
 * other threads (see estep.c). */
#define GB_OWNER_OUT_BUDGET 1024
/* Steps of a signal handler that interrupted the range (probe trap) after
 * which its owner runs natively, with a probe at the return address. */
#define GB_HANDLER_BUDGET 100000

struct gb_engine {
	struct gb_tracee *t;
	struct gb_engine_opts o;
	struct gb_jsonl *out;
	struct gb_icache *ic;
	struct gb_pagetrap *trap;   /* page trap, or NULL */
	struct gb_probes *probes;   /* probe trap, or NULL (not owned) */
	struct gb_ejit *jit;        /* translating engine (ejit.c), or NULL */
	bool range_pending;         /* probe trap: the range's module is not mapped */
	bool vfork_window;          /* a vfork child shares the mm: trap lifted */
	struct ethread *et;         /* parallel to t->threads */
	size_t et_cap;
	ssize_t owner;              /* thread stepping inside the range, or -1 */
	pid_t *detached;            /* fork children we let go */
	size_t ndetached, detached_cap;
	pid_t *pending_kids;        /* children stopped before their parent's event */
	size_t npending_kids, pending_kids_cap;
	uint32_t next_vcpu;
	uint64_t vt;
	size_t rr;
	int exit_status;
	bool *snap_pc_done;
	size_t snap_vt_next;
	struct timespec t0;
	struct gb_progress progress;
	struct gb_engine_stats st;
	enum gb_end end;
	bool ended;
};

/* engine.c */
void eng_finish(struct gb_engine *e, enum gb_end why);
struct ethread *eng_thread(struct gb_engine *e, size_t i);
ssize_t eng_index(struct gb_engine *e, pid_t tid);
size_t eng_live(const struct gb_engine *e);
bool eng_inside(const struct gb_engine *e, uint64_t pc);
/* Probe trap: take the range's run-time bounds (known, or pending). */
void eng_sync_range(struct gb_engine *e);
void eng_set_state(struct gb_engine *e, size_t i, enum tstate s);
/* The one place that changes who owns the range (-1: nobody). */
void eng_set_owner(struct gb_engine *e, ssize_t i);
/* Threads run natively between entries (page or probe trap). */
static inline bool eng_trapped(const struct gb_engine *e) { return e->trap || e->probes; }

/* A signal stop of tid for sig that is the page trap's protection watcher's
 * (never delivered): its changes are applied, cached decodes re-checked. */
bool eng_claim_watch(struct gb_engine *e, pid_t tid, int sig);
/* The signal to deliver to thread i on its next resume (0: none), taken
 * from its pending signal; the page trap's watcher signal is never one. */
int eng_take_signal(struct gb_engine *e, size_t i);

/* estep.c: one instruction of stopped thread i (sets e->owner on entry). */
/* The lines of in-range instruction pc that thread i executed (vt++). */
void eng_commit(struct gb_engine *e, size_t i, uint64_t pc, const struct gb_access *acc, int nacc);
/* An instruction (pc, len, its accesses) ended in signal stop st with the
 * thread at rip: did it raise the signal itself (a synchronous exception)?
 * Then it was executed: how many of its accesses completed before the fault;
 * -1 when the signal is not the instruction's (docs/trace-format.md). */
int eng_fault_done(uint64_t pc, uint8_t len, const struct gb_access *acc, int nacc,
		   const struct gb_stop *st, uint64_t rip);
void eng_step(struct gb_engine *e, size_t i);
/* The instruction a probe hit ran natively, emitted from the registers the
 * BPF program saw before it (thread i has just become the owner). */
void eng_emit_hit(struct gb_engine *e, size_t i);

/* Is pc inside the range (not pending)? */
static inline bool eng_in_range(const struct gb_engine *e, uint64_t pc)
{
	return !e->range_pending && (!e->o.has_start || pc >= e->o.start) &&
	       (!e->o.has_end || pc <= e->o.end);
}
/* Has --max-insns been reached? */
static inline bool eng_max_insns_done(const struct gb_engine *e)
{
	return e->o.max_insns && e->vt - e->o.first_vt >= e->o.max_insns;
}

/* engine.c: resume every stopped thread not waiting for the range. */
void eng_run_natives(struct gb_engine *e);
/* engine.c: end the trace if Ctrl-C, the output, --max-insns, --duration say so. */
void eng_check_limits(struct gb_engine *e, uint64_t iter);

/* ejit.c: the translating engine (docs/trace.md "Engines"). */
struct gb_ejit;
struct gb_ejit *eng_jit_new(void);
/* Run owner i (stopped at an in-range instruction) in translated code until
 * it leaves it; false (nothing done) when the step engine must take this
 * instruction. */
bool eng_jit_run(struct gb_engine *e, size_t i);
/* The image changed (exec): the code cache went with the old one. */
void eng_jit_exec(struct gb_engine *e);
/* Remove the code cache from the process (every thread stopped, none in it). */
void eng_jit_teardown(struct gb_engine *e);
void eng_jit_free(struct gb_engine *e);

/* ethreads.c */
/* The one handler of ptrace events (clone, fork, vfork, vfork-done, exec)
 * of thread i, whether it was stepped or running; the caller resumes it. */
void eng_event(struct gb_engine *e, size_t i, const struct gb_stop *st);
void eng_on_exec(struct gb_engine *e, size_t i);
void eng_on_exit(struct gb_engine *e, size_t i, const struct gb_stop *st);
/* An event of a thread that was not being stepped synchronously. */
void eng_async(struct gb_engine *e, const struct gb_stop *st);
/* Stop every natively running thread (for an owner, a snapshot or the end). */
void eng_hold_all(struct gb_engine *e);
/* Every live thread in a ptrace-stop (for a snapshot): natives are held,
 * threads in a syscall or group-stop interrupted; eng_resume_world puts
 * those back as they were (a syscall is not stepped twice). */
void eng_stop_world(struct gb_engine *e, enum tstate *was);
void eng_resume_world(struct gb_engine *e, const enum tstate *was);
/* Page trap on/off through a stopped thread (any, if i < 0). */
int eng_arm(struct gb_engine *e, ssize_t i);
int eng_disarm(struct gb_engine *e, ssize_t i);

#endif
