/* A trace read as a stream of instruction groups (group.h), each
 * normalised (norm.h) as it goes by: memory stays bounded by one group
 * whatever the trace's length. */
#ifndef GB_TDIFF_STREAM_H
#define GB_TDIFF_STREAM_H

#include "tdiff/group.h"
#include "tdiff/norm.h"

struct gb_treader;
struct gb_tgroups;

/* Groups of the trace rd reads, normalised by norm (counted into *counts,
 * which may be NULL); rd stays the caller's.  NULL on ENOMEM (printed). */
struct gb_tgroups *gb_tgroups__new(struct gb_treader *rd, enum gb_norm norm, struct gb_norm_counts *counts);
/* The next group into *g (its storage reused): 1, 0 at the end, -errno
 * (printed, naming the file and line). */
int gb_tgroups__next(struct gb_tgroups *s, struct gb_tgroup *g);
void gb_tgroups__free(struct gb_tgroups *s);

#endif
