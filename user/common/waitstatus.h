/* A wait(2) status rebuilt from a classified exit: what the shell and
 * meta.json's "exit_status" expect (exit code << 8, or the killing signal). */
#ifndef GB_COMMON_WAITSTATUS_H
#define GB_COMMON_WAITSTATUS_H

#include <stdbool.h>
#include <sys/wait.h>

static inline int gb_wait_status(bool exited, int code, int sig)
{
	return exited ? W_EXITCODE(code, 0) : sig;
}

#endif
