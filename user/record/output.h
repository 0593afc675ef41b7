/* The one way a command creates a file it writes (-o FILE, snapshots).
 *
 * Open it only after the command's checks passed, so that a refused command
 * leaves nothing behind.  The file is opened write-only (never O_RDWR: a FIFO
 * without a reader is refused at once instead of "opening" and then blocking
 * in write()), O_NOFOLLOW (a symlink as the last component is refused,
 * whoever owns it: name the file it points to),
 * O_CLOEXEC, and created with GB_OUTPUT_SHARED (0644) or GB_OUTPUT_PRIVATE
 * (0600, snapshots: they hold the target's memory), minus the umask.
 * /dev/stdout, /dev/stderr, /dev/fd/N and /proc/self/fd/N are not opened
 * again but duplicated: a reopen would truncate a file the caller's shell
 * opened for appending.
 */
#ifndef GB_RECORD_OUTPUT_H
#define GB_RECORD_OUTPUT_H

#include <stdbool.h>
#include <sys/types.h>

enum { GB_OUTPUT_SHARED = 0644, GB_OUTPUT_PRIVATE = 0600 };

struct gb_output {
	int fd;              /* -1 when closed */
	bool created;        /* the file did not exist before */
	bool own;            /* opened by its path here, not a descriptor gebpf
				was given (/dev/stdout...): its offset is shared
				with nobody */
	const char *path;
};

/* 0, or -errno with one "gebpf: PATH: cannot write: <why>" line printed. */
int gb_output_open(struct gb_output *out, const char *path, mode_t mode);
/* Close; with discard, remove the file if gb_output_open created it (a
 * command that failed before writing anything).  0 or -errno of close(). */
int gb_output_close(struct gb_output *out, bool discard);

#endif
