/* Names of code made at run time, from perf's map convention (docs/sample.md
 * "JIT code"): a runtime that compiles code (node --perf-basic-prof, the
 * JVM's perf-map agents, -XX:+DumpPerfMapAtExit, jcmd Compiler.perfmap)
 * writes /tmp/perf-PID.map, one line per piece of code:
 *
 *   START SIZE NAME        START and SIZE in hex (a 0x is allowed)
 *
 * PID being the process's pid as it sees itself (in its own pid namespace)
 * and /tmp its own (its mount namespace's: read through /proc/PID/root).
 * The file is read at the first lookup, and again from where the last read
 * stopped at each lookup that finds it grown (a line not ended yet waits
 * for its newline).  Of two pieces holding an address
 * the later line wins: the runtime reused the memory.
 *
 *   struct gb_perfmap *m = gb_perfmap__open(pid);
 *   const char *name = gb_perfmap__lookup(m, addr, &start, &size);
 *   gb_perfmap__free(m);
 */
#ifndef GB_SYM_PERFMAP_H
#define GB_SYM_PERFMAP_H

#include <stdint.h>
#include <sys/types.h>

struct gb_perfmap;

/* The map of live process pid (its file need not exist yet).  NULL on
 * ENOMEM. */
struct gb_perfmap *gb_perfmap__open(pid_t pid);
/* The map in file path, named name (tests; a snapshot's copy). */
struct gb_perfmap *gb_perfmap__open_file(const char *path, const char *name);
/* The name of the piece of code holding addr, with its start and size;
 * NULL when the map has none.  The string lives as long as the map. */
const char *gb_perfmap__lookup(struct gb_perfmap *m, uint64_t addr, uint64_t *start,
			       uint64_t *size);
/* The map's name as the process knows it ("/tmp/perf-PID.map"). */
const char *gb_perfmap__name(const struct gb_perfmap *m);
void gb_perfmap__free(struct gb_perfmap *m);

#endif
