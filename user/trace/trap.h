/* The entry trap interface (docs/trace.md "Inside the engine").
 *
 * An entry trap decides how threads that do not own the range run, and how
 * one is stopped when it enters the range.  The session makes one of the
 * traps of user/trap/ (trap/traps.h: the patch, probe, page or null trap)
 * and hands it to the engine, which calls it only through this table: the
 * engine's files never ask which trap it is, and include nothing of
 * user/trap/.
 *
 * Every hook but free may be NULL (nothing to do; where NULL means more,
 * the hook's comment says so).  A trap keeps its per-thread state in the
 * engine's thread struct (thread_size bytes, zeroed when the thread
 * appears: eng_trap_priv in engine_int.h).
 */
#ifndef GB_TRACE_TRAP_H
#define GB_TRACE_TRAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptrace/wait.h"

struct gb_engine;
struct gb_trap;

/* What a signal stop is to the trap. */
enum gb_trap_verdict {
	GB_TRAP_PROGRAM = 0, /* not the trap's: the program's own signal */
	GB_TRAP_WATCH,       /* its watcher's: the range's code or protections changed
			      * (applied; never delivered) */
	GB_TRAP_ENTRY,       /* an entry: the thread now waits to own the range */
	GB_TRAP_SWALLOW,     /* the trap's own signal from earlier: nothing ran,
			      * never delivered */
	GB_TRAP_STEP,        /* (a step's stop) the step's own stop, in disguise */
};

/* What the thread was doing when it stopped. */
enum gb_trap_where {
	GB_AT_NATIVE,        /* running on its own (natively, or in a syscall) */
	GB_AT_STEP,          /* single-stepped from pc */
	GB_AT_SYSCALL,       /* run to its syscall-entry stop (pc: the fault address) */
	GB_AT_JIT,           /* in translated code, at an instruction's copy */
	GB_AT_JIT_STUB,      /* in translated code, not at an instruction's copy */
};

/* What the program's fork events are to the trap (child). */
enum gb_trap_child {
	GB_CHILD_FORK,       /* a fork child, stopped, about to be let go untraced */
	GB_CHILD_VFORK,      /* ... a vfork child (it shares the parent's memory) */
	GB_CHILD_VFORK_DONE, /* the vfork parent's PTRACE_EVENT_VFORK_DONE: that
			      * child exec'd or exited */
};

/* The table, in the order of a trap's life: what it is and its set-up; a
 * thread's stop (whose it is; the owner's run; the others' native run);
 * the program's events; the end. */
struct gb_trap_ops {
	/* --- What it is, and its set-up. --- */
	const char *name;            /* "probe", "page", "no" (for messages) */
	size_t thread_size;          /* its per-thread state */
	/* Threads run natively between entries (NULL: never; all stepped). */
	bool (*native)(const struct gb_trap *);
	/* The engine starts (threads stopped, the range known or pending). */
	void (*start)(struct gb_trap *, struct gb_engine *);
	/* The owner's ground: it keeps the range while its pc is on it (NULL:
	 * the range itself). */
	bool (*covers)(const struct gb_trap *, uint64_t pc);

	/* --- A thread's stop: whose it is. --- */
	/* At every stop of a thread tid that is not its exit. */
	void (*settle)(struct gb_trap *, pid_t tid);
	/* Is signal stop st of thread i the trap's?  (where, pc: see above.) */
	enum gb_trap_verdict (*classify)(struct gb_trap *, struct gb_engine *, size_t i,
					 const struct gb_stop *st, enum gb_trap_where where,
					 uint64_t pc);
	/* A signal about to be delivered to thread tid: the watcher's (applied,
	 * never delivered)? */
	bool (*watch)(struct gb_trap *, pid_t tid, int sig);

	/* --- A thread's stop: the owner of the range. --- */
	bool hold_on_enter;          /* every other thread is stopped while one owns
				      * the range (else they run on meanwhile) */
	/* Thread i, waiting at an entry, is about to own the range: 0, or
	 * non-zero to give up (the trace ended, or it died; the patch trap:
	 * it went on without owning the range).  Giving up with want_entry
	 * set again: not yet, it stays stopped and is asked again after the
	 * trap's next idle. */
	int (*enter)(struct gb_trap *, struct gb_engine *, size_t i);
	/* Thread i has just become the owner (after enter). */
	void (*entered)(struct gb_trap *, struct gb_engine *, size_t i);
	/* Thread i becomes (on) or stops being (off) the owner. */
	void (*owner)(struct gb_trap *, struct gb_engine *, size_t i, bool on);
	/* Ownership policy: owner i (owner: it owns the range now) at pc, in
	 * the range or not, on the ground or not: does it keep the range?
	 * Called at every step of every thread. */
	bool (*keep)(struct gb_trap *, struct gb_engine *, size_t i, bool owner, uint64_t pc,
		     bool in_range, bool inside);
	/* May owner i run translated code now (NULL: yes)?  Not while the
	 * range's code may change under the translations, or while the trap's
	 * policy needs every step seen. */
	bool (*translate_ok)(struct gb_trap *, struct gb_engine *, size_t i);
	/* Owner i, stepped from pc (in the range or not), is given signal sig. */
	void (*deliver)(struct gb_trap *, struct gb_engine *, size_t i, uint64_t pc, bool in_range,
			int sig);
	/* Owner i, interrupted at ret on its ground, is at the first instruction
	 * of a signal handler off it, about to run the handler natively to its
	 * rt_sigreturn (still the owner): the trap arms its entries for it, so
	 * that the handler entering the range is an entry.  false: it cannot
	 * (the handler is stepped).  NULL: handlers are stepped. */
	bool (*handler)(struct gb_trap *, struct gb_engine *, size_t i, uint64_t ret);
	/* That native run is over, thread i stopped: back (its frame returned
	 * onto the ground: it goes on as the owner; the trap lifts what it
	 * armed), or not (it entered the range from the handler, left it some
	 * other way, or ran too long: it is the owner no more, and the trap
	 * makes a later return to ret an entry). */
	void (*handler_end)(struct gb_trap *, struct gb_engine *, size_t i, bool back, uint64_t ret);
	/* Owner i gives up the range around a syscall that may block. */
	void (*yield)(struct gb_trap *, struct gb_engine *, size_t i);
	bool leave_native;           /* an owner leaving the range may run natively
				      * at once (nothing to re-arm) */

	/* --- A thread's stop: the others, run natively between entries. --- */
	/* Nobody owns the range; the stopped threads are about to run natively. */
	void (*before_run)(struct gb_trap *, struct gb_engine *);
	/* Stopped thread i is about to run on its own, with signal sig: true
	 * to run it with PTRACE_SYSCALL (T_SYSCALL: its syscall-exit stops come
	 * to syscall_exit), false natively (NULL: natively). */
	bool (*resume)(struct gb_trap *, struct gb_engine *, size_t i, int sig);
	/* Thread i is at a syscall-exit stop. */
	void (*syscall_exit)(struct gb_trap *, struct gb_engine *, size_t i);
	/* The loop's wait for a stop while threads run natively, in ms (0:
	 * 100), and what the trap does after each such wait (the patch trap
	 * drains its ring while the program runs). */
	unsigned poll_ms;
	void (*idle)(struct gb_trap *, struct gb_engine *);

	/* --- The program's events. --- */
	/* A fork or vfork child (its pid), stopped, about to be let go
	 * untraced; the vfork parent's vfork-done (see enum gb_trap_child). */
	void (*child)(struct gb_trap *, struct gb_engine *, pid_t child, enum gb_trap_child ev);
	/* The process exec'd (every other thread gone). */
	void (*exec)(struct gb_trap *, struct gb_engine *);
	/* Thread i exited. */
	void (*exit)(struct gb_trap *, struct gb_engine *, size_t i);
	/* A snapshot: the program's own state for it (true: the trap was
	 * lifted through stopped thread i), and after it (only then). */
	bool (*snap_begin)(struct gb_trap *, struct gb_engine *, size_t i);
	void (*snap_end)(struct gb_trap *, struct gb_engine *, size_t i);

	/* --- The end. --- */
	bool stop_all;               /* threads in a syscall or group-stop are
				      * stopped too (teardown must see every
				      * thread) */
	/* Teardown needs a stopped thread to work through. */
	bool (*must_restore)(const struct gb_trap *);
	/* Every thread held: leave nothing of the trap in the target. */
	void (*teardown)(struct gb_trap *, struct gb_engine *);
	/* Entries into the range (statistics). */
	uint64_t (*entries)(const struct gb_trap *);
	/* After teardown nothing of the trap is in the target (no uprobe):
	 * free may come after the detach (NULL: never). */
	bool (*free_later)(const struct gb_trap *);
	void (*free)(struct gb_trap *);
};

/* Every trap starts with this (its own state follows). */
struct gb_trap {
	const struct gb_trap_ops *ops;
};

/* Free a trap: the probe trap's uprobes go (every thread must be held). */
static inline void gb_trap_free(struct gb_trap *t)
{
	if (t)
		t->ops->free(t);
}

/* May t be freed after an attached target is detached (its free_later)? */
static inline bool gb_trap_free_later(const struct gb_trap *t)
{
	return t && t->ops->free_later && t->ops->free_later(t);
}

static inline const char *gb_trap_name(const struct gb_trap *t) { return t->ops->name; }

#endif
