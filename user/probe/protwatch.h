/* Watch a process's own changes to the protections of an address range
 * (bpf/protwatch.bpf.c), for the page trap (user/trap/pages/pagetrap.c).
 *
 * A BPF program on syscall exit (tp_btf/sys_exit, raw tracepoint fallback)
 * sees every successful mprotect, pkey_mprotect, munmap, mmap (MAP_FIXED or
 * not) and mremap of the watched process (tgid filter as rodata) whose old
 * or new address range overlaps [start, end).  For each it writes a record
 * (what the program asked for) to a ring buffer and sends the calling
 * thread a signal (bpf_send_signal_thread, rodata signo), so the thread
 * stops for its tracer on its way back to user space, before its next
 * instruction.  A per-thread counter says how many of those signals are
 * gebpf's, so the tracer can tell them from the program's own.
 *
 *   struct gb_protwatch *w = gb_protwatch__new(&(struct gb_protwatch_opts){
 *           .tgid = pid, .start = s, .end = e, .signo = SIGURG });
 *   ... at a signal stop of thread tid for signo:
 *   if (gb_protwatch__claim(w, tid)) {          // ours: do not deliver it
 *           gb_protwatch__drain(w, on_change, ctx);   // what the program did
 *   }
 *   gb_protwatch__free(w);                       // unloads everything
 *
 * Needs root (CAP_BPF + CAP_PERFMON) and bpf_send_signal_thread (Linux 5.5).
 */
#ifndef GB_PROBE_PROTWATCH_H
#define GB_PROBE_PROTWATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gebpf_events.h" /* GB_PROT_UNMAPPED, GB_PROT_REREAD */

struct gb_protwatch_opts {
	pid_t tgid;
	uint64_t start, end;        /* watched range [start, end), page aligned */
	int signo;                  /* signal sent to the calling thread */
	uint64_t skip_ip[2];        /* return addresses (after the syscall
				     * instruction) of the tracer's own
				     * injected syscalls: not reported */
	bool quiet;                 /* no "gebpf: ..." line when unavailable */
};

/* One change the program made, in the order it made them.  Every change
 * overlaps [start, end) (it may extend beyond it).  addr is page aligned,
 * len rounded up to whole pages.  Per syscall:
 *   mprotect, pkey_mprotect   [addr, addr+len)           prot = the new PROT_*
 *   munmap                    [addr, addr+len)           prot = -1
 *   mmap                      the new mapping            prot = the new PROT_*
 *   mremap                    the old range, then the new range (each only
 *                             if it overlaps): old prot = -1 (-2 with
 *                             MREMAP_DONTUNMAP), new prot = -2
 * prot -2 (GB_PROT_REREAD) means "not known here: re-read /proc/PID/maps
 * for [addr, addr+len)".  One syscall gives one signal, whatever its number
 * of changes.  If the kernel side could not record a change (its 64 KiB ring
 * buffer full, say), the next drain reports one change with tid 0, nr 0,
 * [start, end) and prot -2: re-read the whole range. */

struct gb_prot_change {
	pid_t tid;
	uint32_t nr;                /* syscall number (SYS_mprotect, ...) */
	uint64_t addr, len;         /* the range the protections now apply to */
	int prot;                   /* PROT_* the range has now; -1 = unmapped; -2 = re-read */
};

typedef void (*gb_prot_cb)(void *ctx, const struct gb_prot_change *c);

struct gb_protwatch;

/* Load and attach.  NULL when unavailable (no BPF, no BTF and no raw
 * tracepoint, no bpf_send_signal_thread); a "gebpf: warning: ..." line
 * says why unless quiet. */
struct gb_protwatch *gb_protwatch__new(const struct gb_protwatch_opts *o);
/* A signal signo that thread tid stopped with: true (and one fewer
 * pending) if it was sent by the watcher. */
bool gb_protwatch__claim(struct gb_protwatch *w, pid_t tid);
/* Deliver every pending change; never blocks.  Returns how many. */
int gb_protwatch__drain(struct gb_protwatch *w, gb_prot_cb cb, void *ctx);
void gb_protwatch__free(struct gb_protwatch *w);

#endif
