/* Where a captured snapshot's memory comes from until it is saved: the
 * stopped process itself, or its copy-on-write copy (a clone that never
 * runs, killed when the source is freed), plus a scratch file holding the
 * maps that had to be copied while the process was frozen (MAP_SHARED,
 * MADV_DONTFORK, MADV_WIPEONFORK: the copy does not hold them as they were).
 *
 * Reads go through the caller's buffer: nothing here is sized by a mapping.
 * For a sparse map, /proc/PID/pagemap says which pages exist (present or
 * swapped); the others are zeros without being read, so an untouched
 * MAP_NORESERVE region costs no memory in the target nor here.  Bytes are
 * read with pread on /proc/PID/mem (not process_vm_readv, whose page pinning
 * would unshare every copy-on-write page); a page that cannot be read is
 * zero and counted. */
#ifndef GB_SNAP_SOURCE_H
#define GB_SNAP_SOURCE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "snap/snapshot.h"

struct gb_snap_src;

/* The buffer the bytes go through (capture spill and save). */
#define GB_SNAP_SRC_CHUNK (1u << 20)

/* Read from pid; NULL when out of memory. */
struct gb_snap_src *gb_snap_src__new(pid_t pid);
/* From now on read from child (the copy), which is killed and reaped by
 * gb_snap_src__free. */
int gb_snap_src__set_child(struct gb_snap_src *src, pid_t child);
pid_t gb_snap_src__child(const struct gb_snap_src *src);
/* Copy m's bytes now (from the current pid) to the scratch file in dir,
 * through buf; sets m->spilled.  0 or -errno. */
int gb_snap_src__spill(struct gb_snap_src *src, struct gb_snap_map *m, const char *dir, uint8_t *buf,
		       uint64_t buflen);
/* Bytes [off, off + len) of m (page aligned, within it) into buf.  *holes:
 * no page of the range exists (buf was not touched: the range is zeros).
 * Returns the pages read (>= 0; unreadable pages are zero in buf and added
 * to *failed), or -errno (-ESRCH: the process is gone). */
int64_t gb_snap_src__read(struct gb_snap_src *src, const struct gb_snap_map *m, uint64_t off,
			  uint8_t *buf, uint64_t len, bool *holes, uint64_t *failed);
/* Kill and reap the copy, close everything. */
void gb_snap_src__free(struct gb_snap_src *src);

#endif
