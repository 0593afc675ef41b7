/* Tracee memory.  Reads use process_vm_readv split at page boundaries and fall
 * back to pread on /proc/PID/mem for pages it cannot read; writes go through
 * /proc/PID/mem (which can write read-only text, like PTRACE_POKEDATA). */
#ifndef GB_PTRACE_MEM_H
#define GB_PTRACE_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Bytes read (may be short at an unreadable page), or -errno if none. */
ssize_t gb_mem_read(pid_t pid, uint64_t addr, void *buf, size_t len);
/* Bytes written, or -errno. */
ssize_t gb_mem_write(pid_t pid, uint64_t addr, const void *buf, size_t len);

#endif
