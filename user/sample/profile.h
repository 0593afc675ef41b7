/* Sample aggregation for `gebpf sample --report`, `--folded` and `--pprof`.
 *
 * Each sample arrives as its frames (kernel frames, innermost first, then
 * user frames, innermost first).  Every distinct address is a location,
 * named once when first seen (user/unwind: function, module, build id,
 * file:line; kernel addresses from /proc/kallsyms), so a profile written
 * after the target exited still has its names.  Distinct stacks (per
 * process when per_process) are counted.
 *
 * --report: a table of the top pcs and the top functions (the innermost
 *           frame of each sample).
 * --folded: one line per distinct stack, "outer;...;inner COUNT", the
 *           input flamegraph.pl and inferno read; kernel frames end in
 *           "_[k]"; per_process stacks start with "COMM-PID".
 * pprof:    pprof.h walks the locations and stacks.
 */
#ifndef GB_SAMPLE_PROFILE_H
#define GB_SAMPLE_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "sample/pycode.h"
#include "unwind/kallsyms.h"
#include "unwind/unwind.h"

struct gb_profile;

/* u names user addresses, k kernel ones (NULL: unnamed).  Neither is owned. */
struct gb_profile *gb_profile__new(struct gb_unwinder *u, const struct gb_kallsyms *k,
				   bool per_process);   /* NULL on ENOMEM */

/* One sample: kframes[0..nk) innermost first, then uframes[0..nu)
 * innermost first, where uframes[0] is the pc itself when upc (else a
 * return address, as every later user frame).  0 or -ENOMEM. */
int gb_profile__add(struct gb_profile *p, pid_t pid, const char *comm,
		    const uint64_t *kframes, size_t nk,
		    const uint64_t *uframes, size_t nu, bool upc);

/* A user frame of gb_profile__add_frames(): a native address, or a
 * Python function at a line (py set; addr and ret unused). */
struct gb_profile_frame {
	uint64_t addr;
	bool ret;                  /* a return address (else the pc) */
	const struct gb_pyfunc *py;
	int line;
};
/* gb_profile__add() with user frames that may be Python frames: each
 * distinct (function, line) of a process is a location, named
 * "module.qualname" with its file, line and first line. */
int gb_profile__add_frames(struct gb_profile *p, pid_t pid, const char *comm,
			   const uint64_t *kframes, size_t nk,
			   const struct gb_profile_frame *uframes, size_t nu);

/* Top `top` rows (0: 20) of pcs and functions, with a header line. */
int gb_profile__report(struct gb_profile *p, FILE *f, size_t top, const char *header);
/* Folded stacks, most frequent first. */
int gb_profile__folded(struct gb_profile *p, FILE *f);

/* A location (ids are index + 1). */
struct gb_profile_loc {
	uint64_t addr;
	pid_t pid;                 /* 0 for kernel addresses */
	bool kernel, ret;          /* ret: a return address */
	bool python;               /* a Python function (addr: 0) */
	int start_line;            /* Python: the function's first line */
	char *func, *module, *build_id, *file;   /* NULL when unknown */
	char *sym;                 /* func as the ELF names it (mangled, @version), or NULL */
	uint64_t func_off, mod_start, mod_end;
	int line;
	bool source_due;           /* file and line not read yet (gb_profile__sources) */
};
/* Read the source file and line of every location that has none yet:
 * at the first sample of a location only its name is read (the line
 * tables of a module can take seconds to read the first time, which
 * would hold the samples behind it); call before writing the profile,
 * and before the unwinder forgets exited processes. */
void gb_profile__sources(struct gb_profile *p);
/* The name --report, --folded and pprof give a location: "func" (kernel:
 * "func_[k]"), else "module+0xOFFSET" (from the module's start), else
 * "[unknown]". */
void gb_profile__loc_name(const struct gb_profile_loc *l, char *buf, size_t len);
size_t gb_profile__nlocs(const struct gb_profile *p);
const struct gb_profile_loc *gb_profile__loc(const struct gb_profile *p, size_t id);
/* Call cb for each distinct stack: location ids innermost first. */
typedef int (*gb_profile_stack_cb)(void *ctx, const uint64_t *ids, size_t n, pid_t pid,
				   const char *comm, uint64_t count);
int gb_profile__each_stack(const struct gb_profile *p, gb_profile_stack_cb cb, void *ctx);
uint64_t gb_profile__total(const struct gb_profile *p);
/* Do its stacks start with the process (COMM-PID)? */
bool gb_profile__per_process(const struct gb_profile *p);
/* The executable of pid as its maps name it (NULL when unknown). */
const char *gb_profile__exe(const struct gb_profile *p, pid_t pid);

void gb_profile__free(struct gb_profile *p);

#endif
