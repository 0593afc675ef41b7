/* A launch in a new pid namespace, at a chosen pid (pidns.c). */
#ifndef GB_PTRACE_PIDNS_H
#define GB_PTRACE_PIDNS_H

#include <sys/types.h>

#include "ptrace/tracee.h"

/* The process of o (o->ns_pid in a new pid namespace), stopped before its
 * exec: its pid in gebpf's namespace, or -errno (an errno of the child's
 * on errfd: exec, unshare or clone3 refused).  *keeper: gebpf's child that
 * ends as the process ends (wait for it). */
pid_t gb_pidns_start(const struct gb_launch_opts *o, int errfd, pid_t *keeper);

#endif
