/* Which way the trace writer writes a regular file it opened itself
 * (record/lines.h): buffered (write() into the page cache) or direct
 * (O_DIRECT, from gebpf's buffer to the disk).  Neither is faster
 * everywhere: where fresh page-cache pages are dear (a VM whose free pages
 * the host takes back) buffered writes copy at a few hundred MB/s for a
 * core's worth of CPU while the disk takes 1.5 GB/s direct; on a busy disk
 * direct writes wait for it while buffered ones return at memory speed.
 * So the writer measures both on the trace itself: it starts buffered,
 * tries direct for one window, keeps the faster (bytes per second of its
 * write calls, a window each), and tries the other again after
 * GB_WMODE_RETRY, twice as late each time it loses, its window cut to a
 * quarter when it is far behind by then. */
#ifndef GB_RECORD_WMODE_H
#define GB_RECORD_WMODE_H

#include <stdbool.h>
#include <stdint.h>

#define GB_WMODE_WINDOW  (16ull << 20)  /* bytes a measurement takes */
#define GB_WMODE_RETRY   (512ull << 20) /* the other way is measured again after */
#define GB_WMODE_RETRY_MAX (16ull << 30) /* ... twice as late each time it loses */
#define GB_WMODE_MARGIN  1.25           /* ... and taken when this much faster */

struct gb_wmode {
	bool can_direct;
	bool direct;            /* the way in use */
	double rate[2];         /* [direct] bytes/s of its last window; 0 = never */
	uint64_t age[2];        /* bytes written since that window */
	uint64_t retry[2];      /* ... after which it is tried again */
	bool trying;            /* the way in use is being tried again */
	uint64_t win_bytes, win_ns;
	uint64_t switches;
};

void gb_wmode__init(struct gb_wmode *m, bool can_direct);
/* A round of bytes written in ns the way in use.  True when the way changes
 * (from the next round on). */
bool gb_wmode__round(struct gb_wmode *m, uint64_t bytes, uint64_t ns);
/* Direct writes refused (EINVAL): buffered from now on. */
void gb_wmode__no_direct(struct gb_wmode *m);

#endif
