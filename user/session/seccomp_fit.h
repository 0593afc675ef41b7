/* Before anything is injected into a target: what its seccomp state lets the
 * trace do (issue 23: a target in strict seccomp was SIGKILLed by the
 * injected mmap of the code cache or mprotect of the page trap).
 *
 * What each mechanism makes the target run: the translating engine an
 * injected mmap/mprotect/munmap of its code cache and, at each exit from
 * the cache, a getpid that gebpf skips at its entry stop (seccomp then sees
 * system call -1); the page trap injected mprotects and the mmap/munmap of
 * its exit trampoline; the probe trap and the step engine nothing.  A
 * thread in strict mode allows none of it; a filter is run on each call
 * (ptrace/seccomp.h); a filter that cannot be read is assumed to refuse.
 * docs/trace.md "Seccomp". */
#ifndef GB_SESSION_SECCOMP_FIT_H
#define GB_SESSION_SECCOMP_FIT_H

#include <stdbool.h>
#include <stdint.h>

#include "ptrace/tracee.h"
#include "trace/engine.h"

/* For every stopped thread of t: *jit becomes false when the code cache
 * would be refused, *trap GB_TRAP_NONE when it is GB_TRAP_PAGES and the page
 * trap would be; one warning says so, naming the pid, the thread's seccomp
 * state and what is used instead.  range_start: the range's first address
 * (the code cache is placed near it). */
void gb_trace_seccomp_fit(const struct gb_tracee *t, uint64_t range_start,
			  enum gb_trap_kind *trap, bool *jit);

#endif
