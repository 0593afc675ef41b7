/* The entry traps (docs/trace.md "Entry traps"), each filling the engine's
 * trap table (trace/trap.h) over its own mechanism, each in its own room:
 *
 *   none.c    the null trap (--trap none): every thread is single-stepped
 *   pages/    the page trap: the range's pages lose PROT_EXEC (pagetrap.c)
 *   probes/   the probe trap: a uprobe at every entry (probes.c)
 *   patch/    the patch trap: the entries patched into a stop-free code
 *             cache (patch.h lists its layers)
 *
 * The session (session/choose.c) picks one and makes it here; the engine
 * calls it only through its table.  A trap uses the engine's interface
 * (trace/trap.h, trace/engine_int.h), never the other way; the patch trap
 * makes one of the others for an image it does not apply to. */
#ifndef GB_TRAP_TRAPS_H
#define GB_TRAP_TRAPS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct gb_trap;
struct gb_trace_range;
struct gb_probes;
struct gb_tracee;

/* --trap none: every thread is single-stepped (a pending range is looked
 * for after each mmap). */
struct gb_trap *gb_trap_none_new(struct gb_trace_range *r);
/* The page trap over the range's pages of pid (trap/pages/pagetrap.h);
 * NULL when there is nothing to trap (said why). */
struct gb_trap *gb_trap_pages_new(pid_t pid, struct gb_trace_range *r);
/* The probe trap over the probes p (trap/probes/probes.h), which it owns. */
struct gb_trap *gb_trap_probes_new(struct gb_probes *p, struct gb_trace_range *r);
/* The patch trap (trap/patch/) over the range of the stopped tracee t, in
 * the module file path (link-time lo..hi, run-time = + bias): NULL, with
 * one line saying why, when it does not apply (the caller uses the probe
 * trap). */
struct gb_trap *gb_trap_patch_new(struct gb_tracee *t, struct gb_trace_range *r, const char *path,
				  uint64_t lo, uint64_t hi, uint64_t bias);
/* The patch trap for a range whose module is not mapped yet: set up once
 * it is (looked for after each mmap; trap/patch/exec.c). */
struct gb_trap *gb_trap_patch_pending(struct gb_tracee *t, struct gb_trace_range *r);
/* Whether --trap patch was asked for: if not (the default), its refusal in
 * a later image (exec, a module mapped late) is said under -v only. */
void gb_trap_patch_asked(struct gb_trap *t, bool asked);

#endif
