/* The kernel's uprobe page ("[uprobes]", where uprobes run probed
 * instructions out of line), mapped at a known moment so that the program's
 * later mappings are placed the same under every trap: at launch (the
 * session) and at an exec's exit (the engine, whichever runner ran the
 * exec).  docs/trace.md "Probe trap". */
#ifndef GB_TRACE_XOL_H
#define GB_TRACE_XOL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Before the program runs on (launch, an exec's exit): make the kernel
 * map its uprobe page now, at a place that does not depend on when the first probe fires, so that the
 * program's later mappings are placed the same under every trap (thread
 * stacks, large allocations).  tid: the stopped thread; no instruction of
 * the program runs.  0 or -errno (no uprobes: nothing changes). */
int gb_xol_reserve(pid_t tgid, pid_t tid);

/* gb_xol_reserve in two steps.  Removing a uprobe waits for the kernel's
 * grace periods (35-50 ms here: most of a short launch's set-up), and a
 * thread that runs into its int3 while it is being removed can be killed by
 * a SIGTRAP (the kernel finds the int3 but no uprobe), so it may be removed
 * after the program runs on only once the thread ran the instruction.
 * hold: the page mapped, the uprobe kept at gb_xol_addr (its int3 in the
 * program's code: nothing may read that code or step the thread over it
 * until release).  release: the uprobe goes now; or, with after_hit when
 * the instruction probed runs once (the entry point's code up to it falls
 * through and nothing branches back into it), it is disarmed (a hit runs
 * nothing) and a thread of gebpf's removes it once the hit is counted,
 * while the program runs on.
 * hold: 0 (*held set) or -errno (*held NULL). */
struct gb_xol;
int gb_xol_hold(pid_t tgid, pid_t tid, struct gb_xol **held);
uint64_t gb_xol_addr(const struct gb_xol *x);
void gb_xol_release(struct gb_xol *x, bool after_hit);

#endif
