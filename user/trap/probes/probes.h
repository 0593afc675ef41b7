/* The probe trap (docs/trace.md "Entry traps"): a uprobe at every address
 * where execution can enter the range from outside (its start, the return
 * site of each call inside it, the targets of direct branches from the rest
 * of the module, exception landing pads), each firing a BPF program that
 * records the registers and stops the thread (user/probe/probetrap.h).
 *
 * The kernel runs the probed instruction before the thread stops, so the
 * engine emits it from the recorded registers (eng_emit_hit) and steps on
 * from the next one.  Uprobes belong to gebpf's file descriptors: they
 * vanish when gebpf exits, however it exits, and nothing else of gebpf is
 * left in the target.
 *
 * The range is kept as link-time addresses of one module file; its run-time
 * addresses are known once the module is mapped (at set-up, or at the first
 * hit: a pending range, for a library that an exec chain or dlopen maps
 * later), and forgotten at exec.
 *
 *   struct gb_probes *p = gb_probes__new(&(struct gb_probes_opts){ ... });
 *   if (!p) ... fall back to the page trap (the reason was printed)
 *   at a signal stop:  if (gb_probes__claim(p, &st, &hit)) ... an entry
 *   gb_probes__free(p);
 */
#ifndef GB_TRAP_PROBES_H
#define GB_TRAP_PROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "probe/probetrap.h"
#include "ptrace/wait.h"

struct gb_probes;

struct gb_probes_opts {
	pid_t tgid;
	const char *path;          /* the module file that holds the range */
	uint64_t lo, hi;           /* the range, inclusive, as link-time addresses */
	bool mapped;               /* bias is known: run-time = link-time + bias */
	uint64_t bias;
	bool quiet;                /* no message when the probe trap cannot be used */
	/* Only these of the range's entries (link-time, ascending; the patch
	 * trap's unpatched ones), when nonly > 0. */
	const uint64_t *only;
	size_t nonly;
	bool redirect;             /* load the program with redirects where the
				    * kernel can (probe/probetrap.h contract 7) */
	bool values;               /* trace --values: every entry must give them
				    * once it ran (gb_probes_values_lost) */
};

/* Why the instruction at an entry, once it ran natively, cannot give
 * trace --values what it read and the registers before it (docs/trace-
 * format.md "Values"): it writes a register the BPF program does not see
 * (x87, vector, mxcsr, a segment base) or loads the register file, or it
 * both reads and writes memory (what it read may be gone).  NULL when it
 * can: its reads are still in memory, the rest of the file as it was. */
struct gb_insn;
const char *gb_probes_values_lost(const struct gb_insn *in);

/* Finds the entries, checks that each entry instruction can be rebuilt
 * from its pre-instruction registers, loads the BPF program and attaches
 * the uprobes.  NULL, with one line saying why, when it cannot (no BPF or
 * uprobes, an entry that cannot be rebuilt, ...): use the page trap. */
struct gb_probes *gb_probes__new(const struct gb_probes_opts *o);
void gb_probes__free(struct gb_probes *p);
/* Its probe trap (for redirects: probe/probetrap.h contract 7). */
struct gb_probetrap *gb_probes__trap(struct gb_probes *p);

/* The range's run-time bounds; false while the module is not mapped. */
bool gb_probes__range(const struct gb_probes *p, uint64_t *start, uint64_t *end);

/* A signal stop: true when it is a probe's (never to be delivered), with
 * the hit (the probed instruction's address and the registers before it).
 * A pending range becomes known at its first hit. */
bool gb_probes__claim(struct gb_probes *p, const struct gb_stop *st, struct gb_probe_hit *hit);

/* The accesses of the probed instruction in of a hit, rebuilt from the
 * registers before it (the hit's, completed from now, the registers at its
 * stop: segment bases).  Their count, or -errno. */
struct gb_insn;
struct gb_access;
int gb_probe_hit__accesses(struct gb_probe_hit *hit, const struct user_regs_struct *now,
			   const struct gb_insn *in, struct gb_access *acc, int max);

/* The stop of a single-step of thread tid from pc over a probed address:
 * uprobes end it with a SIGTRAP of its own (never to be delivered). */
bool gb_probes__step_artifact(struct gb_probes *p, const struct gb_stop *st, uint64_t pc);
/* Thread tid exited. */
void gb_probes__forget(struct gb_probes *p, pid_t tid);

/* A signal stop of the program's own (st) of a thread that a probe may
 * have hit just before (its probe's signal queued behind): the hit, taken
 * now.  true with hit filled. */
bool gb_probes__take_early(struct gb_probes *p, const struct gb_stop *st, struct gb_probe_hit *hit);

/* Thread tid is being single-stepped (probes it passes do not stop it). */
void gb_probes__stepping(struct gb_probes *p, pid_t tid, bool on);

/* One more entry at run-time address addr inside the range (the return
 * into the range of a signal handler that interrupted it).  0 or -errno;
 * -ENOTSUP (said in one line) under values at an instruction that cannot
 * give them once it ran (gb_probes_values_lost): the trace must end. */
int gb_probes__add_entry(struct gb_probes *p, uint64_t addr);

/* The original code bytes over [addr, addr+len) where probes sit (the
 * process shows their int3): for the decoder.  Matches gb_icache's patch
 * callback. */
void gb_probes__patch(void *p, uint64_t addr, uint8_t *buf, size_t len);

/* The process exec'd: its run-time addresses are unknown again.  from: the
 * tid of the thread that exec'd, before (not the pid: another thread than
 * the main one, whose probes are attached again for the new image;
 * gb_probetrap__reattach).  0 or -errno (the new image is not probed). */
int gb_probes__exec(struct gb_probes *p, pid_t from);

#endif
