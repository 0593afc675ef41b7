/* What a thread's seccomp state would do to a system call gebpf makes it
 * run (an injected syscall, a code-cache exit stub), decided before it runs:
 * strict mode allows read, write, exit and rt_sigreturn only; a filter
 * (mode 2) is read back from the kernel (PTRACE_SECCOMP_GET_FILTER: root,
 * a kernel with CONFIG_CHECKPOINT_RESTORE) and run here, every filter of
 * the thread, on the seccomp_data the kernel would build, and their
 * actions combined as the kernel combines them (the most restrictive wins).
 *
 * The thread must be in a ptrace-stop of ours (the kernel's requirement for
 * reading filters).  docs/trace.md "Seccomp".
 */
#ifndef GB_PTRACE_SECCOMP_H
#define GB_PTRACE_SECCOMP_H

#include <stdint.h>
#include <sys/types.h>

struct gb_seccomp;

/* Thread tid's seccomp state: *out NULL when it has none (mode 0).  0,
 * -ESRCH, -ENOMEM, or the -errno of reading a filter (then *mode says the
 * mode, and nothing can be said of the filter: assume the worst). */
int gb_seccomp__read(pid_t tid, int *mode, struct gb_seccomp **out);
/* The action (SECCOMP_RET_ALLOW, _KILL_PROCESS, _ERRNO | errno, ...) the
 * state gives syscall nr(args) made by a `syscall` at ip.  nr -1 is a
 * syscall the tracer skipped at its entry stop (the kernel runs seccomp
 * after that stop, on the changed number). */
uint32_t gb_seccomp__action(const struct gb_seccomp *s, long nr, const uint64_t args[6],
			    uint64_t ip);
/* "allow", "kill", "errno 1", "trap", "trace", "notify", "log". */
const char *gb_seccomp_action_name(uint32_t action, char *buf, size_t len);
void gb_seccomp__free(struct gb_seccomp *s);

#endif
