/* Engine internals, for the engine's files and the entry traps (user/trap/,
 * which sit above the engine: they call it through this header, and it calls
 * them only through their table, trace/trap.h); not for other rooms.  The
 * engine's files, bottom to top (each calls only the ones above it in this
 * list, never one below):
 *
 *   ecore.c     the state: threads (the one per-thread struct), owner,
 *               signals, the one resume, limits
 *   commit.c    an in-range instruction's lines (both engines)
 *   evalues.c   the same with --values (the step runner's)
 *   eevents.c   thread and process events (clone, fork, exec), whoever met
 *               them
 *   ejit.c      the translating runner: the owner in translated code
 *   ehandler.c  the owner's signal handler outside the range, run natively
 *               to its sigreturn (its stops)
 *   ethreads.c  the dispatcher of every stop of a thread not being run by
 *               a runner
 *   estep.c     the step runner: one instruction of the owner
 *   engine.c    the loop: who runs next; the engine's lifecycle
 */
#ifndef GB_TRACE_ENGINE_INT_H
#define GB_TRACE_ENGINE_INT_H

#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "ptrace/wait.h"
#include "trace/engine.h"
#include "trace/icache.h"
#include "trace/progress.h"
#include "trace/range.h"
#include "trace/trap.h"

enum tstate {
	T_STOPPED,   /* in a ptrace-stop, ours to step or resume */
	T_NATIVE,    /* running natively (PTRACE_CONT), entry trap armed */
	T_SYSCALL,   /* inside a syscall (PTRACE_SYSCALL to its exit stop) */
	T_DYING,     /* could not be resumed or read: its exit is on its way */
	T_GROUP,     /* in a group-stop (PTRACE_LISTEN) */
	T_JIT,       /* the owner, running translated code (its stops: ejit.c) */
	T_HANDLER,   /* the owner, running a signal handler natively (PTRACE_SYSCALL)
		      * to its frame's rt_sigreturn (its stops: ehandler.c) */
	T_GONE,
};

/* The engine's part of a thread: hung on its gb_thread (ptrace/tracee.h,
 * .eng), so that one struct per thread holds its ptrace state (tid,
 * stopped/exited, its pending signal) and this.  Never keep a pointer to
 * the gb_thread across a call that may add a thread (the array grows);
 * this struct does not move. */
struct ethread {
	int vcpu;            /* -1 until its first in-range instruction */
	enum tstate state;
	bool want_entry;     /* stopped at the range's entry, waiting to own it */
	bool stepped;        /* T_STOPPED after a step: the trap flag still set */
	/* eng_resume's count, and its value when a hold last interrupted the
	 * thread (eng_hold_all): any ptrace-stop takes a pending interrupt
	 * with it (a clone's event stop, a syscall's), so a thread resumed
	 * since then is interrupted again. */
	uint32_t resumes, kicked_at;
	bool kicked;
	struct {             /* T_HANDLER: the handler run natively */
		uint64_t sp;     /* rsp at its frame's rt_sigreturn */
		uint64_t ret;    /* where it interrupted the owner (on its ground) */
		double t0;       /* when it started */
		bool sigret;     /* between that rt_sigreturn's entry and exit stops */
		bool interrupted; /* interrupted (the end, or it ran too long) */
	} h;
	/* Handlers on its ground, stepped (ehandler.c), innermost last: their
	 * frame's restorer (the handler's return address), rsp at its
	 * rt_sigreturn, the pc they interrupted, the trap flag the program had. */
	struct {
		uint64_t restorer, sp, ret;
		bool tf;
	} fr[4];
	unsigned nfr;
	bool vals_synced;    /* --values: its last line left its registers as they
			      * are (else a regs line first: evalues.c) */
	alignas(max_align_t) unsigned char trap[]; /* the trap's (ops->thread_size) */
};

struct gb_engine {
	struct gb_tracee *t;
	struct gb_engine_opts o;
	struct gb_jsonl *out;
	struct gb_icache *ic;
	struct gb_trap *trap;       /* the entry trap (not owned; never NULL) */
	struct gb_trace_range *range; /* the range (the session's) */
	uint64_t range_gen;         /* range->gen the decodes are for */
	uint64_t image_gen;         /* counts execs: a runner's state of the old image is stale */
	pid_t exec_from;            /* the tid the thread that exec'd last had before (the
				     * pid: the main thread's exec; else it took the pid) */
	bool xol_due;               /* an exec: the uprobe page is placed at its exit */
	struct gb_ejit *jit;        /* translating engine (ejit.c), or NULL */
	struct eng_vals *vals;      /* --values (evalues.c), or NULL */
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
	double t0;
	struct gb_progress progress;
	struct gb_engine_stats st;
	enum gb_end end;
	bool ended;
};

/* ecore.c */
void eng_finish(struct gb_engine *e, enum gb_end why);
/* Thread i's engine state (made on first use: a new thread). */
struct ethread *eng_thread(struct gb_engine *e, size_t i);
static inline struct ethread *eng_th(const struct gb_engine *e, size_t i)
{
	return (struct ethread *)e->t->threads[i].eng;
}
static inline void *eng_trap_priv(const struct gb_engine *e, size_t i)
{
	return eng_th(e, i)->trap;
}
static inline pid_t eng_tid(const struct gb_engine *e, size_t i) { return e->t->threads[i].tid; }
static inline enum tstate eng_state(const struct gb_engine *e, size_t i)
{
	return eng_th(e, i)->state;
}
/* From now on the engine uses trap nt (not owned; every thread stopped, its
 * trap state zeroed, nt's start called): a trap that cannot follow the
 * process into a new image hands over. */
void eng_switch_trap(struct gb_engine *e, struct gb_trap *nt);
/* Thread i is a new thread (its state, the trap's too, as new). */
void eng_thread_reset(struct gb_engine *e, size_t i);
void eng_free_threads(struct gb_engine *e);
ssize_t eng_index(struct gb_engine *e, pid_t tid);
size_t eng_live(const struct gb_engine *e);
/* A stopped thread, i if it is one (-1: none). */
ssize_t eng_any_stopped(const struct gb_engine *e, ssize_t i);
/* The one place a thread's state changes. */
void eng_set_state(struct gb_engine *e, size_t i, enum tstate s);
/* The one place that resumes a thread the engine lets run (req: PTRACE_CONT,
 * PTRACE_SYSCALL, PTRACE_LISTEN) into state s: false, and T_DYING (its exit
 * is on its way), when it cannot be resumed. */
bool eng_resume(struct gb_engine *e, size_t i, int req, int sig, enum tstate s);
/* Thread i reported a group-stop (its process stopped by job control:
 * SIGSTOP, SIGTSTP...): left stopped, listening (PTRACE_LISTEN, T_GROUP),
 * until SIGCONT makes it report again (an interrupt stop). */
void eng_listen(struct gb_engine *e, size_t i);
/* Thread i, stopped (T_STOPPED) and last seen in a group-stop (its
 * gb_thread's group_stop: found stopped at the attach, or held by gebpf
 * while stopped): when its process is still stopped, it listens again
 * (eng_listen) and true; false when a SIGCONT came meanwhile (it runs as
 * any other).  Never run a thread of a stopped process: a resume other
 * than PTRACE_LISTEN would (docs/trace.md "A stopped process"). */
bool eng_park(struct gb_engine *e, size_t i);
/* eng_park every stopped thread that may be in a group-stop. */
void eng_park_all(struct gb_engine *e);
/* Thread i, stopped after a step, without the trap flag (gb_step_untrap),
 * still stopped: for a thread that stays stopped long (the end, the
 * others' turn), so that a SIGKILL of gebpf and its worker then does not
 * kill it with SIGTRAP. */
void eng_untrap(struct gb_engine *e, size_t i);
/* The one place that changes who owns the range (-1: nobody). */
void eng_set_owner(struct gb_engine *e, ssize_t i);
/* Is pc inside the range (not pending)? */
static inline bool eng_in_range(const struct gb_engine *e, uint64_t pc)
{
	return gb_trace_range_has(e->range, pc);
}
/* Is pc on the owner's ground (the range, or what the trap covers)? */
bool eng_inside(const struct gb_engine *e, uint64_t pc);
/* Has --max-insns been reached? */
static inline bool eng_max_insns_done(const struct gb_engine *e)
{
	return e->o.max_insns && e->vt - e->o.first_vt >= e->o.max_insns;
}
/* Decodes follow the range (a probe trap's range known late). */
void eng_range_follow(struct gb_engine *e);
/* A signal stop of tid for sig that is the trap's watcher's (never
 * delivered): applied, cached decodes re-checked. */
bool eng_claim_watch(struct gb_engine *e, pid_t tid, int sig);
/* Thread i has signal sig for the program: delivered on its next resume
 * (its gb_thread's pending_sig, which a detach delivers too). */
static inline void eng_keep_signal(struct gb_engine *e, size_t i, int sig)
{
	e->t->threads[i].pending_sig = sig;
}
/* The signal to deliver to thread i on its next resume (0: none), taken
 * from its pending signal; a trap's watcher signal is never one. */
int eng_take_signal(struct gb_engine *e, size_t i);
/* Thread i exited (st: its exit): gone, the owner no more. */
void eng_on_exit(struct gb_engine *e, size_t i, const struct gb_stop *st);
/* Resume every stopped thread not waiting for the range (natively). */
void eng_run_natives(struct gb_engine *e);
/* End the trace if Ctrl-C, the output, --max-insns, --duration say so. */
void eng_check_limits(struct gb_engine *e, uint64_t iter);

/* The trap's hooks (trap.h), NULL meaning nothing to do. */
#define TRAP_OPS(e) ((e)->trap->ops)
static inline bool trap_native(const struct gb_engine *e)
{
	return TRAP_OPS(e)->native && TRAP_OPS(e)->native(e->trap);
}
static inline enum gb_trap_verdict trap_classify(struct gb_engine *e, size_t i,
						 const struct gb_stop *st,
						 enum gb_trap_where where, uint64_t pc)
{
	return TRAP_OPS(e)->classify ? TRAP_OPS(e)->classify(e->trap, e, i, st, where, pc)
				     : GB_TRAP_PROGRAM;
}
#define TRAP_CALL(e, hook, ...) \
	do { if (TRAP_OPS(e)->hook) TRAP_OPS(e)->hook(e->trap, e, __VA_ARGS__); } while (0)
#define TRAP_CALL0(e, hook) \
	do { if (TRAP_OPS(e)->hook) TRAP_OPS(e)->hook(e->trap, e); } while (0)

/* commit.c: the lines of in-range instruction pc that thread i executed (vt++). */
void eng_commit(struct gb_engine *e, size_t i, uint64_t pc, const struct gb_access *acc, int nacc);
/* The same, t being eng_th(e, i) (a caller committing a stretch of one
 * thread's records looks it up once). */
void eng_commit_t(struct gb_engine *e, size_t i, struct ethread *t, uint64_t pc,
		  const struct gb_access *acc, int nacc);
/* evalues.c: --values (e->vals set). */
struct eng_vals *eng_vals_new(void);
void eng_vals_free(struct eng_vals *v);
/* Before thread i steps in-range instruction (regs: its registers now, acc:
 * its accesses): the read values, and the whole register file when its
 * stretch starts. */
void eng_vals_before(struct gb_engine *e, size_t i, const struct user_regs_struct *regs,
		     const struct gb_access *acc, int nacc);
enum eng_vals_how {
	ENG_VALS_DONE,      /* it completed: the registers it wrote */
	ENG_VALS_FAULTED,   /* it raised a signal: none written */
	ENG_VALS_SYSCALL,   /* a syscall, at its entry: rcx and r11 */
};
/* eng_commit with the values (the step after eng_vals_before). */
void eng_vals_commit(struct gb_engine *e, size_t i, uint64_t pc, const struct gb_insn *insn,
		     const struct gb_access *acc, int nacc, enum eng_vals_how how);
/* Thread i's registers changed other than by a traced step: its next
 * instruction gets a regs line first. */
void eng_vals_unsync(struct gb_engine *e, size_t i);
/* The translating engine's (ejit.c): the regs line before thread i's next
 * instruction from its registers and XSAVE area at the stretch's start
 * (taken when it entered the cache); an instruction's values from its
 * record (user/jit/vals.c: vals, done), else from the thread (live: its
 * registers after the instruction; its memory now). */
void eng_vals_file_at(struct gb_engine *e, size_t i, const struct user_regs_struct *regs,
		      const uint8_t *xs, size_t xlen);
struct eng_vals_rec {
	const uint8_t *vals;                   /* the record's values (gb_jit_rec.vals) */
	bool done;                             /* ... with its registers and writes */
	const struct user_regs_struct *live;   /* else the registers after it */
};
void eng_vals_commit_rec(struct gb_engine *e, size_t i, uint64_t pc, const struct gb_insn *insn,
			 const struct gb_access *acc, int nacc, enum eng_vals_how how,
			 const struct eng_vals_rec *src);
/* An instruction (pc, len, its accesses) ended in signal stop st with the
 * thread at rip: did it raise the signal itself (a synchronous exception)?
 * Then it was executed: how many of its accesses completed before the fault;
 * -1 when the signal is not the instruction's (docs/trace-format.md). */
int eng_fault_done(uint64_t pc, uint8_t len, const struct gb_access *acc, int nacc,
		   const struct gb_stop *st, uint64_t rip);
/* A program signal (not a trap's) that a thread raised itself? */
bool eng_sync_fault(const struct gb_stop *st);

/* eevents.c */
/* A ptrace event (clone, fork, vfork, vfork-done, exec) of thread i, whether
 * it was stepped or running; the caller resumes it. */
void eng_event(struct gb_engine *e, size_t i, const struct gb_stop *st);
/* A stop of tid, no thread of the engine's: a thread or a fork child whose
 * first stop came before its creator's event (adopted, or kept for the
 * event); was tid a child let go already? */
void eng_adopt(struct gb_engine *e, pid_t tid);
bool eng_was_detached(struct gb_engine *e, pid_t pid);
/* Thread i at a syscall's exit: after an exec, the new image's uprobe page
 * placed now (trace/xol.h). */
void eng_exec_exit(struct gb_engine *e, size_t i);

/* ethreads.c */
/* The dispatcher: every stop of a thread that no runner is running (natives,
 * threads in a syscall or group-stop, stops met while holding or stopping
 * the world). */
void eng_dispatch(struct gb_engine *e, const struct gb_stop *st);
/* Handle every stop that is ready; with block, first wait for one, at most
 * timeout_ms.  Ctrl-C interrupts the wait. */
void eng_poll(struct gb_engine *e, bool block, int timeout_ms);
/* Wait for the next stop of tid (-1: any) and dispatch it; false when
 * there is none to wait for. */
bool eng_wait_one(struct gb_engine *e, pid_t tid);
/* Interrupt thread i (in a syscall or group-stop) and dispatch its stop. */
void eng_interrupt(struct gb_engine *e, size_t i);
/* Thread i in a stepped syscall (T_SYSCALL), interrupted (its stops on the
 * way handled as they come): true when it is T_STOPPED. */
bool eng_stop_in_syscall(struct gb_engine *e, size_t i);
/* Stop every natively running thread (for an owner, a snapshot or the end). */
void eng_hold_all(struct gb_engine *e);
/* Every live thread in a ptrace-stop (for a snapshot): natives are held,
 * threads in a syscall or group-stop interrupted; eng_resume_world puts
 * those back as they were (a syscall is not stepped twice). */
void eng_stop_world(struct gb_engine *e, enum tstate *was);
void eng_resume_world(struct gb_engine *e, const enum tstate *was);

/* ehandler.c (docs/trace.md "Signals"). */
/* Owner i, stepped from ret (rflags: the program's, before the step) on
 * its ground into the first instruction of a signal handler outside it:
 * the handler runs natively (T_HANDLER) when the trap allows it; false
 * (nothing done: it is stepped) otherwise. */
bool eng_handler_run(struct gb_engine *e, size_t i, uint64_t ret, uint64_t rflags);
/* The owner, stepped out of its ground, is at the restorer of a handler on
 * its ground that it entered by a step (r its registers): run natively to
 * that frame's rt_sigreturn, traced on from where it lands (a handler may
 * have moved it: a SIGILL handler stepping over a ud2).  false: not so. */
bool eng_handler_frame_left(struct gb_engine *e, size_t i, const struct user_regs_struct *r);
/* A stop st of owner i running its handler natively. */
void eng_handler_stop(struct gb_engine *e, size_t i, const struct gb_stop *st);
/* The loop while owner i runs its handler: the end, or a handler that does
 * not come back soon, interrupts it (then it has left the range). */
void eng_handler_tick(struct gb_engine *e, size_t i);

/* estep.c: one instruction of stopped thread i (sets e->owner on entry). */
void eng_step(struct gb_engine *e, size_t i);

/* ejit.c: the translating runner (docs/trace.md "Engines"). */
struct gb_ejit;
struct gb_ejit *eng_jit_new(void);
/* Start owner i (stopped at an in-range instruction) in translated code
 * (T_JIT: its stops go to eng_jit_stop until it leaves); false (nothing
 * done) when the step engine must take this instruction (or there is no
 * translating engine). */
bool eng_jit_enter(struct gb_engine *e, size_t i);
/* A stop st of owner i running translated code: made the lines it stands
 * for; it goes on in translated code, or is given back (T_STOPPED, at an
 * original instruction), or went on otherwise (natively, exited...). */
void eng_jit_stop(struct gb_engine *e, size_t i, const struct gb_stop *st);
/* The loop while owner i runs translated code: an end interrupts it. */
void eng_jit_tick(struct gb_engine *e, size_t i);
/* Remove the code cache from the process through stopped thread i (every
 * thread held, none in the cache): true when it is gone (or was never
 * there); eng_jit_forget then drops gebpf's view, saying so when it stays
 * mapped.  engine.c's teardown tries each stopped thread, then each thread
 * in a syscall, interrupted for it (eng_stop_in_syscall). */
bool eng_jit_unmap(struct gb_engine *e, size_t i);
void eng_jit_forget(struct gb_engine *e);
void eng_jit_free(struct gb_engine *e);

#endif
