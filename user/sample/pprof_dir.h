/* `gebpf sample --every T --pprof-dir DIR`: a directory of one pprof
 * profile per period, the shape a profiling backend's collector picks up
 * (docs/sample.md "Continuous mode").
 *
 * Each profile is named HOST-YYYYMMDDTHHMMSSZ.pb.gz, from the host name and
 * the period's start in UTC; it is written to a hidden temporary name in
 * DIR (.HOST-...pb.gz.tmp) and renamed, so a reader of DIR sees whole
 * profiles only.  After each write the oldest of this host's profiles in
 * DIR are removed beyond `keep` files and beyond `max_age` seconds (by the
 * time in their names); other files in DIR are never touched.
 */
#ifndef GB_SAMPLE_PPROF_DIR_H
#define GB_SAMPLE_PPROF_DIR_H

#include <stdint.h>

#include "sample/pprof.h"
#include "sample/profile.h"

struct gb_pprof_dir;

/* keep 0: no count bound; max_age 0: no age bound.  NULL (printed) on
 * error. */
struct gb_pprof_dir *gb_pprof_dir__new(const char *dir, uint64_t keep, double max_age);
/* Write p as the profile of the period info->time_ns (its start, ns since
 * the epoch) lasting info->duration_ns, then apply the bounds.  0 or
 * -errno (printed). */
int gb_pprof_dir__write(struct gb_pprof_dir *d, const struct gb_profile *p,
			const struct gb_pprof_info *info);
/* Profiles written so far. */
uint64_t gb_pprof_dir__count(const struct gb_pprof_dir *d);
void gb_pprof_dir__free(struct gb_pprof_dir *d);

#endif
