/* gebpf diff of two snapshots (snap_diff.c); two traces: tdiff/tdiff.h. */
#ifndef GB_SNAP_DIFF_H
#define GB_SNAP_DIFF_H

#include <stdio.h>

#include "snap/snapshot.h"

/* Print the differences; returns how many (0 = equal). */
int gb_snap_diff(const struct gb_snapshot *a, const struct gb_snapshot *b, FILE *out);

#endif
