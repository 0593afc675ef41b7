/* Single-stepping one instruction: the one place that knows the hardware's
 * quirks.  The trace engine, `snap --after` and run-to-address use it.
 *
 * - pushf pushes RFLAGS with TF set by the step: TF is cleared in the pushed
 *   copy (unless the program had TF set itself).
 * - A step over cpuid may run one more instruction under KVM: cpuid is run
 *   to a breakpoint planted after it instead.
 * - PTRACE_EVENT stops on the way (clone, fork, exec...) go to on_event and
 *   the step goes on; an interrupt stop queued earlier is stepped past.
 *
 * The wait is not cut short by Ctrl-C: one instruction that is not a
 * syscall ends at once (syscalls are run with PTRACE_SYSCALL by the caller).
 * One that has not ended a second after a SIGINT/SIGTERM (the scheduler
 * has not run it, its cgroup is frozen) is interrupted and waited for,
 * however long it takes (gb_wait_resumed): it comes back as an interrupt
 * stop, the instruction not run.  A thread is never left running a step
 * (a tracer that dies meanwhile leaves it the trap flag: SIGTRAP).
 */
#ifndef GB_PTRACE_STEP_H
#define GB_PTRACE_STEP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/wait.h"

/* What the caller knows of the instruction at the thread's rip; NULL: the
 * code bytes are read and looked at here. */
struct gb_step_insn {
	bool pushf, cpuid;
	uint8_t len;
	uint64_t rflags;             /* RFLAGS before the instruction */
};

typedef void (*gb_step_event_fn)(void *ctx, const struct gb_stop *st);

/* One instruction of stopped thread tid, delivering sig (0: none; a step
 * with a signal only enters its handler).  *st: the stop that ended it
 * (GB_STOP_STEP when the instruction completed; GB_STOP_SIGNAL, exit, ...
 * otherwise).  0, or -errno when tid cannot be stepped or waited for. */
int gb_step(pid_t tid, int sig, const struct gb_step_insn *in, gb_step_event_fn on_event,
	    void *ctx, struct gb_stop *st);

/* After gb_step with a signal: did an instruction run?  A signal with a
 * handler is delivered by building its frame, and the step stops at the
 * handler's first instruction without running one (a ptrace_notify stop,
 * si_code SIGTRAP); a signal that is ignored (SIGCHLD, SIGURG, SIGWINCH by
 * default) is dropped and the step runs the instruction (a debug trap,
 * TRAP_TRACE, or TRAP_BRKPT after a syscall). */
bool gb_step_ran(const struct gb_stop *st);

/* Wait for the stop that ends req (PTRACE_SINGLESTEP, PTRACE_SYSCALL...)
 * of tid, handling events and queued interrupts as gb_step does.  After a
 * SIGINT/SIGTERM it may end in an interrupt stop (or an event stop) short of
 * where req was going: the thread is stopped, never left running. */
int gb_step_wait(pid_t tid, int req, gb_step_event_fn on_event, void *ctx, struct gb_stop *st);

/* Take the trap flag off thread tid, stopped after a step, without it
 * running an instruction: a stopped thread keeps the flag the step set
 * until its next resume, and a tracer that dies without detaching (SIGKILL
 * of gebpf and its worker) lets it run into a SIGTRAP.  PTRACE_INTERRUPT
 * while stopped queues a stop that the thread takes before it returns to
 * user mode; PTRACE_CONT (which clears the flag) then ends in it.  One
 * stop's cost: for a thread that stays stopped long (the end of a trace,
 * the others' turn).  0 with *st the stop it is in now (an interrupt stop,
 * or a group-stop or exit that came first), or -errno. */
int gb_step_untrap(pid_t tid, struct gb_stop *st);
/* The same from thread tid's signal-delivery-stop for sig, which it takes
 * on the way: it stops at its handler's first instruction (the frame built,
 * an interrupted syscall restarted or failed as SA_RESTART says), or where
 * it was when the signal is ignored (an interrupted syscall rewound to its
 * instruction), or in a group-stop (a stop signal), never having run an
 * instruction; or it dies of it.  (A step with sig runs the instruction
 * when the signal enters no handler.) */
int gb_step_deliver(pid_t tid, int sig, struct gb_stop *st);

/* Breakpoints (int3) for run-to-address: plant at addr (*orig gets the
 * byte), recognise the stop at it (SIGTRAP with rip == addr + 1: rip is
 * rewound to addr), remove. */
int gb_bp_plant(pid_t tid, uint64_t addr, uint8_t *orig);
bool gb_bp_reached(pid_t tid, const struct gb_stop *st, uint64_t addr);
void gb_bp_remove(pid_t tid, uint64_t addr, uint8_t orig);

#endif
