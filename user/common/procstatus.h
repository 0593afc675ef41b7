/* Fields of /proc/PID/status: the one reader (TracerPid, Tgid, CapEff, ...). */
#ifndef GB_COMMON_PROCSTATUS_H
#define GB_COMMON_PROCSTATUS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The value of "KEY:" for pid (0 = gebpf itself), without the leading
 * whitespace, into val.  0, -ENOENT (no such field), or -errno of the open. */
int gb_status_field(pid_t pid, const char *key, char *val, size_t len);
/* The same, parsed as a number (decimal; hex for the Cap* masks).  0 or -errno. */
int gb_status_u64(pid_t pid, const char *key, uint64_t *out);

#endif
