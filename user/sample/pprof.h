/* `gebpf sample --pprof FILE`: a profile in Google's profile.proto format
 * (github.com/google/pprof, proto/profile.proto), gzip-compressed, encoded
 * with protobuf-c from that .proto (Debian golang-github-google-pprof-dev).
 *
 * Sample types samples/count and cpu/nanoseconds (count x the sampling
 * period); one mapping per module of each process (path, address range,
 * build id), one location per distinct address, one function per distinct
 * (name, source file), lines where debug info has them; each sample has
 * labels pid and comm.  Mappings in a fixed order: the main process's
 * executable first (pprof's "File:"), then by process and address, the
 * kernel last.  A caller's location address is its return address - 1
 * (the call instruction, as perf shows it; its line is looked up there).  Written to an open descriptor (the caller created
 * the file); pprof.c documents nothing else.
 */
#ifndef GB_SAMPLE_PPROF_H
#define GB_SAMPLE_PPROF_H

#include <stdint.h>
#include <sys/types.h>

#include "sample/profile.h"

struct gb_pprof_info {
	uint64_t period_ns;        /* 1e9 / Hz */
	int64_t time_ns;           /* start, ns since the epoch */
	int64_t duration_ns;
	pid_t main_pid;            /* its executable is the first mapping ("File:");
				    * 0: the process with the most samples */
};

/* Encode p and write it gzip-compressed to fd (not closed).  0 or -errno
 * (printed). */
int gb_pprof_write(const struct gb_profile *p, const struct gb_pprof_info *info, int fd,
		   const char *name);

#endif
