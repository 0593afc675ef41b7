/* The maps keeper (docs/sample.md "Stacks"): a thread of gebpf sample that
 * reads /proc/PID/maps of the processes being sampled every few hundred
 * milliseconds and keeps the last text it read of each.  The unwinder
 * names a sample when gebpf's drain reaches it, which can be seconds after
 * it was taken (a first unwind through a large library's debug data, a
 * slow machine): by then a short-lived process may be gone, and the
 * libraries it mapped after its start with it.  The keeper's reads do not
 * wait for the drain, so the unwinder takes the last maps the process had
 * while it lived (unwind.c: report).
 *
 * Watched: a prepared process (a launched command) until it is gone, and a
 * sampled one while it has samples newer than ACTIVE_NS.  Thread-safe; the
 * texts are copies. */
#ifndef GB_UNWIND_MAPSKEEP_H
#define GB_UNWIND_MAPSKEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct gb_mapskeep;

/* Starts the thread: every EVERY_NS.  NULL (errno set) on failure. */
struct gb_mapskeep *gb_mapskeep_new(uint64_t every_ns, uint64_t active_ns);
/* Stops and joins the thread, frees the texts. */
void gb_mapskeep_free(struct gb_mapskeep *k);
/* Watch pid: PREPARED for good (until it is gone), else while its newest
 * sample (SAMPLE_NS, CLOCK_MONOTONIC) is recent. */
void gb_mapskeep_watch(struct gb_mapskeep *k, pid_t pid, bool prepared, uint64_t sample_ns);
/* Stop watching pid and drop its text. */
void gb_mapskeep_forget(struct gb_mapskeep *k, pid_t pid);
/* The last text read of pid when it is newer than *gen (0: none yet) and
 * was read after AFTER_NS (CLOCK_MONOTONIC): a malloc'd copy in *text (its
 * length in *len, never 0).  *gen is then its generation (also when it was
 * read before AFTER_NS: seen).  False when there is nothing to apply. */
bool gb_mapskeep_newer(struct gb_mapskeep *k, pid_t pid, uint64_t after_ns, uint64_t *gen,
		       char **text, size_t *len);
/* Read every watched process now (tests; the thread's round). */
void gb_mapskeep_round(struct gb_mapskeep *k);

#endif
