/* uprobe_multi links (Linux 6.6+; used from 6.10): many uprobes of one file behind one BPF
 * link, removed together when the link's descriptor is closed.  Closing a
 * uprobe (of either kind) waits for the kernel's grace periods, ~0.1 s on
 * the test VM; one link of 200 uprobes closes in ~15 ms.  Debian 12's
 * libbpf (1.1) predates them: these two calls are the raw bpf(2) commands. */
#ifndef GB_PROBE_UMULTI_H
#define GB_PROBE_UMULTI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* enum bpf_attach_type BPF_TRACE_UPROBE_MULTI (include/uapi/linux/bpf.h). */
#define GB_BPF_TRACE_UPROBE_MULTI 48

/* The kernel has uprobe_multi links (probed once, without attaching) and
 * is 6.10 or later (before, the pid filter let only the main thread's hits
 * through). */
bool gb_umulti_supported(void);
/* One link of the kprobe-type program prog_fd (loaded with expected attach
 * type GB_BPF_TRACE_UPROBE_MULTI) on n offsets of path, for process pid,
 * cookies[i] given to bpf_get_attach_cookie.  The link's fd, or -errno. */
int gb_umulti_attach(int prog_fd, const char *path, const uint64_t *offs,
		     const uint64_t *cookies, size_t n, pid_t pid);

#endif
