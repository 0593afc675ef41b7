/* The code cache's region in a target (docs/trace.md "Engines"): a shared
 * anonymous mapping of GB_JIT_SIZE bytes made by an injected mmap within
 * 1 GiB of the range (RIP-relative operands and a patch's rel32 must
 * reach), its code part made read+exec by an injected mprotect, and mapped
 * by gebpf through /proc/PID/map_files.  Used by the translating runner
 * (trace/ejit.c) and the patch trap (trap/patch/trap.c). */
#ifndef GB_TRACE_JITMAP_H
#define GB_TRACE_JITMAP_H

#include <stdint.h>
#include <sys/types.h>

struct gb_jitmap {
	uint8_t *view;      /* gebpf's mapping, GB_JIT_SIZE bytes */
	uint64_t addr;      /* the region in the target (0: none) */
};

/* Make the region in pid through stopped thread tid, near [start, end]:
 * 0, or -errno with one warning line ending in "; <fallback>".  A signal
 * that arrived meanwhile goes to *pending_sig (if 0). */
int gb_jitmap_map(pid_t pid, pid_t tid, uint64_t start, uint64_t end, const char *fallback,
		  struct gb_jitmap *out, int *pending_sig);
/* The injected munmap of the region at addr through stopped thread tid of
 * pid (a fork child: its copy): 0 or -errno. */
int gb_jitmap_unmap_in(pid_t pid, pid_t tid, uint64_t addr, int *pending_sig);
/* The same two (the patch trap's), each call made through the
 * self-restoring stub of ptrace/clonestub.h where the vDSO has room: a
 * SIGKILL of the worker during one leaves the thread to finish it and go
 * on as it was (else injected as above).  A pending signal the thread is
 * stopped to take (*pending_sig) may be delivered first: it is then at its
 * handler's entry. */
int gb_jitmap_map_safe(pid_t pid, pid_t tid, uint64_t start, uint64_t end, const char *fallback,
		       struct gb_jitmap *out, int *pending_sig);
int gb_jitmap_unmap_safe(pid_t pid, pid_t tid, uint64_t addr, int *pending_sig);
/* Drop gebpf's view (the target's mapping is not touched). */
void gb_jitmap_drop(struct gb_jitmap *m);

#endif
