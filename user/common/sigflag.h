/* Ctrl-C / SIGTERM handling: the handler only sets a flag that main loops
 * check (libbpf-bootstrap's habit).  Installed without SA_RESTART so a blocking
 * waitpid()/poll() returns EINTR and the loop sees the flag promptly. */
#ifndef GB_COMMON_SIGFLAG_H
#define GB_COMMON_SIGFLAG_H

#include <stdbool.h>

void gb_sigflag_install(void);
bool gb_sigflag_stop(void);     /* a SIGINT/SIGTERM/SIGHUP arrived */
int gb_sigflag_signo(void);     /* which one (0 if none) */

#endif
