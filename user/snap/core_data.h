/* The data part of a core file (docs/snapshot-format.md): each map's bytes
 * read through a few fixed buffers (from the loaded file or the capture's
 * source), written at the offset the layout gave it with all-zero pages left
 * as holes, and hashed (SHA-256, for the JSON note) on a second thread
 * meanwhile, in order.  Memory: GB_CORE_DATA_NBUF x GB_SNAP_SRC_CHUNK bytes,
 * whatever the size of the maps. */
#ifndef GB_SNAP_CORE_DATA_H
#define GB_SNAP_CORE_DATA_H

#include <stdint.h>

#include "snap/snapshot.h"

#define GB_CORE_DATA_NBUF 4
/* A map with more never-populated bytes than this gets no digest
 * (m->sha256 ""): hashing them would hash zeros. */
#define GB_CORE_DATA_HASH_HOLES (256ull << 20)

struct gb_core_data;

struct gb_core_data_stats {
	uint64_t failed;           /* pages that could not be read (zeros) */
	uint64_t written, bytes;   /* non-zero bytes written; map bytes */
};

/* interruptible: a Ctrl-C/SIGTERM (common/sigflag.h) makes the copy of a
 * map return -EINTR. */
struct gb_core_data *gb_core_data__new(int fd, bool interruptible);
/* Copy m (with bytes) at m->core_off.  0; 1 when no page of a map that is
 * not sparse could be read (it then has no bytes: the caller lays out
 * again); -errno.  m->sha256 is final after gb_core_data__drain ("" when
 * the map has more than GB_CORE_DATA_HASH_HOLES never-populated bytes). */
int gb_core_data__copy(struct gb_core_data *d, struct gb_snapshot *s, struct gb_snap_map *m);
/* Wait for every hash; returns 0 or -errno, and the stats of the copies
 * since the last drain. */
int gb_core_data__drain(struct gb_core_data *d, struct gb_core_data_stats *st);
void gb_core_data__free(struct gb_core_data *d);
/* pwrite all of p (retried on EINTR and short writes): 0 or -errno. */
int gb_core_data__pwrite(int fd, const uint8_t *p, uint64_t len, uint64_t off);

#endif
