/* The page trap (docs/trace.md "How it works"): PROT_EXEC is removed from the pages
 * that hold the range, so the process runs natively outside the range and
 * faults (SIGSEGV, SEGV_ACCERR, si_addr == rip, or the trapped page's first
 * byte for an instruction that starts on the page before and ends on a
 * trapped one) when it enters; the engine
 * then restores exec, single-steps while the PC stays on those pages, and
 * re-protects on leaving.  The mprotect calls are injected into the tracee.
 *
 * The original protections are read from /proc/PID/maps and re-checked on
 * every entry and before every restore, so a program that mprotects or
 * unmaps the pages itself keeps what it set.  The state is one extent per
 * executable VMA stretch inside the range: memory and work follow the mapped
 * code, not the range's size (docs/trace.md, "How it works": the page-trap bullets).
 */
#ifndef GB_TRAP_PAGETRAP_H
#define GB_TRAP_PAGETRAP_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "ptrace/wait.h"

struct gb_pagetrap;

/* The executable pages of pid inside [start, end] (whole pages).  NULL with
 * a message printed (nothing executable there, no syscall instruction to
 * inject through outside them). */
struct gb_pagetrap *gb_pagetrap__new(pid_t pid, uint64_t start, uint64_t end);
void gb_pagetrap__free(struct gb_pagetrap *p);

/* Remove / restore PROT_EXEC, injecting mprotect through stopped thread tid.
 * *pending_sig receives a signal that arrived meanwhile.  0 or -errno. */
int gb_pagetrap__arm(struct gb_pagetrap *p, pid_t tid, int *pending_sig);
int gb_pagetrap__disarm(struct gb_pagetrap *p, pid_t tid, int *pending_sig);
/* Every executable page of the range carries our protection. */
bool gb_pagetrap__armed(const struct gb_pagetrap *p);
/* Some page does (it must be given back before detaching). */
bool gb_pagetrap__touched(const struct gb_pagetrap *p);

/* Arm through a trampoline (ptrace/tramp.h) on the way out of stopped
 * thread tid (registers r), without a stop: returns 1 when done (the caller
 * resumes tid with PTRACE_CONT and no signal), 0 when not possible here
 * (use gb_pagetrap__arm), or -errno. */
int gb_pagetrap__arm_on_resume(struct gb_pagetrap *p, pid_t tid, const struct user_regs_struct *r);
/* At every stop of a thread: one stopped inside the trampoline gets its own
 * registers back (and the trap counts as unarmed if its mprotect had not
 * run yet). */
void gb_pagetrap__settle(struct gb_pagetrap *p, pid_t tid);
/* Unmap the trampoline page through stopped thread tid before detaching. */
void gb_pagetrap__release(struct gb_pagetrap *p, pid_t tid, int *pending_sig);
/* Is the trampoline page mapped (to be released before detaching)? */
bool gb_pagetrap__has_tramp(const struct gb_pagetrap *p);

/* The program itself changed [addr, addr+len) to prot (-1: unmapped, -2:
 * unknown, re-read it): those pages are the program's again until armed. */
void gb_pagetrap__program_changed(struct gb_pagetrap *p, uint64_t addr, uint64_t len, int prot);

/* The signal the protection watcher (probe/protwatch.h) stops a thread
 * with right after the program changed the range's protections itself. */
#define GB_PAGETRAP_SIGNAL SIGRTMAX
/* A signal stop of tid: true when it is the watcher's (not to be delivered);
 * the changes it reports are applied first (the trap is re-armed before
 * anyone runs natively again). */
bool gb_pagetrap__claim_signal(struct gb_pagetrap *p, pid_t tid, int sig);

/* Some trapped page is writable: its code may change while the program
 * runs natively (decodes must be re-checked at each entry). */
bool gb_pagetrap__writable(const struct gb_pagetrap *p);

/* Is pc on the trapped pages, or on an instruction that may end on them
 * (within 14 bytes before one)? */
bool gb_pagetrap__covers(const struct gb_pagetrap *p, uint64_t pc);
/* Is this stop the fetch fault of the instruction at rip on the trapped
 * pages (SEGV_ACCERR at rip, or at the first byte of the trapped page the
 * instruction crosses onto)?  Whether the protection is ours is not
 * checked (a fault queued before the trap was lifted passes too). */
bool gb_pagetrap__is_fetch_fault(const struct gb_pagetrap *p, const struct gb_stop *st, uint64_t rip);
/* Is this stop our entry fault (a fetch fault as above on pages that carry
 * the protection we set)?  rip is the thread's rip. */
bool gb_pagetrap__is_entry(struct gb_pagetrap *p, const struct gb_stop *st, uint64_t rip);

/* A forked child (a copy of our protections): restore its protections
 * before letting it go.  tid is the child, stopped. */
int gb_pagetrap__fix_child(struct gb_pagetrap *p, pid_t child);

struct gb_pagetrap_stats { uint64_t arms, disarms, entries; };
void gb_pagetrap__stats(const struct gb_pagetrap *p, struct gb_pagetrap_stats *s);

#endif
