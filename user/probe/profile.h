/* Sample aggregation for `gebpf sample --report` and `--folded`.
 *
 * Counts samples per pc and per function, and folded user stacks, naming
 * addresses with the process's symbols (user/sym) while the process is
 * alive: each address is named the first time it is seen, so a report
 * printed after the target exited still has its names.
 *
 * --report: a table of the top pcs and the top functions.
 * --folded: one line per distinct stack, "outer;...;inner COUNT", the
 *           input flamegraph.pl and inferno read.
 */
#ifndef GB_PROBE_PROFILE_H
#define GB_PROBE_PROFILE_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "probe/sampler.h"

struct gb_profile;

struct gb_profile *gb_profile__new(pid_t pid);   /* NULL on ENOMEM */
/* 0 or -ENOMEM. */
int gb_profile__add(struct gb_profile *p, const struct gb_sample *s);
/* Top `top` rows (0: 20) of pcs and functions, with a header line. */
void gb_profile__report(struct gb_profile *p, FILE *f, size_t top, const char *header);
/* Folded stacks, most frequent first. */
void gb_profile__folded(struct gb_profile *p, FILE *f);
void gb_profile__free(struct gb_profile *p);

#endif
