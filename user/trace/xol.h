/* The kernel's uprobe page ("[uprobes]", where uprobes run probed
 * instructions out of line), mapped at a known moment so that the program's
 * later mappings are placed the same under every trap: at launch (the
 * session) and at an exec's exit (the engine, whichever runner ran the
 * exec).  docs/trace.md "Probe trap". */
#ifndef GB_TRACE_XOL_H
#define GB_TRACE_XOL_H

#include <sys/types.h>

/* Before the program runs on (launch, an exec's exit): make the kernel
 * map its uprobe page now, at a place that does not depend on when the first probe fires, so that the
 * program's later mappings are placed the same under every trap (thread
 * stacks, large allocations).  tid: the stopped thread; no instruction of
 * the program runs.  0 or -errno (no uprobes: nothing changes). */
int gb_xol_reserve(pid_t tgid, pid_t tid);

#endif
