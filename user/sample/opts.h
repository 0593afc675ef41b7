/* The rules of gebpf sample's options (docs/sample.md), once argv is read
 * (user/cli/cmd_sample.c): which go together, and the output mode and
 * stacks they make. */
#ifndef GB_SAMPLE_OPTS_H
#define GB_SAMPLE_OPTS_H

#include <stdbool.h>

#include "sample/session.h"

/* o as the options set it; report, folded, call_graph: --report, --folded
 * and --call-graph were given.  Sets o->mode (and o->stacks when no
 * --call-graph chose them).  0, or -1 with one line saying why. */
int gb_sample_opts_settle(struct gb_sample_session_opts *o, bool report, bool folded,
			  bool call_graph);

#endif
