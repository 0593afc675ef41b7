/* Whether the traced range is code of one file (the probe and patch traps
 * need that), out of session.c. */
#ifndef GB_TRACE_RANGE_FILE_H
#define GB_TRACE_RANGE_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The run-time range start..end (inclusive) of pid in one file's code: its
 * file (path, len), link-time bounds lo..hi and bias (run-time - link-time),
 * and NULL; or why not (code on writable pages, anonymous memory, several
 * mappings), a static string. */
const char *gb_trace_range_file(pid_t pid, uint64_t start, uint64_t end, char *path, size_t len,
				uint64_t *lo, uint64_t *hi, uint64_t *bias);

#endif
