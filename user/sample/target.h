/* The process `gebpf sample` watches, launched or attached, without ptrace.
 *
 * Launch: fork a child that waits on a gate pipe (ASLR off unless asked),
 * so the BPF programs can be attached for its pid before it runs; then
 * gb_target__release() lets it exec and reports whether the exec worked.
 * Attach: an existing pid.  Either way the target is never stopped, and
 * gb_target__fd() becomes readable when it exits (a pidfd).
 */
#ifndef GB_SAMPLE_TARGET_H
#define GB_SAMPLE_TARGET_H

#include <stdbool.h>
#include <sys/types.h>

struct gb_target;

/* Fork the gated child for argv (argv[0] looked up in PATH).  NULL with a
 * "gebpf: ..." line printed on failure. */
struct gb_target *gb_target__launch(char *const *argv, bool aslr);
/* An existing process.  NULL (line printed) if it does not exist, is a
 * zombie or is a kernel thread. */
struct gb_target *gb_target__attach(pid_t pid);
pid_t gb_target__pid(const struct gb_target *t);
bool gb_target__launched(const struct gb_target *t);
/* Launch mode: open the gate and wait until the exec happened.  0, or
 * -errno of a failed exec (line printed).  Attach mode: no-op. */
int gb_target__release(struct gb_target *t);
/* A launched command is held stopped after its exec by release(): let it
 * run (once the sampler is armed, so that nothing it does is missed). */
void gb_target__go(struct gb_target *t);
/* Readable once the process exited (-1 if the kernel has no pidfd: then
 * poll gb_target__exited() instead). */
int gb_target__fd(const struct gb_target *t);
/* The process has exited (reaped if it is our child). */
bool gb_target__exited(struct gb_target *t);
/* Launch mode: kill and reap a child that still runs (SIGKILL if it was
 * never released).  Attach mode: nothing.  Then free.  NULL is fine. */
void gb_target__free(struct gb_target *t);

#endif
