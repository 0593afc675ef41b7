/* Kernel features gebpf's BPF programs depend on, probed at run time
 * (libbpf-tools habit): a missing feature disables a program with
 * bpf_program__set_autoload(false) and one clear line, instead of a failed
 * load.  See docs/bpf.md for what falls back to what.
 */
#ifndef GB_PROBE_FEATURES_H
#define GB_PROBE_FEATURES_H

#include <stdbool.h>
#include <stdint.h>

/* Route libbpf's messages through gb_libbpf_print (common/log.h): shown
 * only in verbose mode.  Idempotent; called by every probe constructor. */
void gb_probe_libbpf_init(void);

/* "gebpf: warning: WHO: pid PID: <fmt>" unless quiet: why a probe
 * constructor returns NULL. */
void gb_probe_warn(bool quiet, const char *who, int pid, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The running kernel exposes its BTF (/sys/kernel/btf/vmlinux). */
bool gb_feat_kernel_btf(void);
/* Kernel BTF has a typedef named name (e.g. "btf_trace_page_fault_user":
 * the tracepoint can be attached as tp_btf). */
bool gb_feat_btf_typedef(const char *name);
/* The verifier lets a kprobe-type program (a uprobe's) store to its
 * registers (upstream Linux 6.18, not every build of it: "bpf: Allow uprobe
 * program to change context registers"; the same series makes the kernel
 * skip the probed instruction when the program moved ip).  Probed once: a
 * 4-instruction program that stores ip back, which older verifiers refuse
 * ("invalid bpf_context access").  docs/bpf.md "Redirects". */
bool gb_feat_uprobe_write_ctx(void);
/* A BPF helper (enum bpf_func_id) is callable from a perf_event program. */
bool gb_feat_perf_helper(int func_id);

/* perf events a sampler can run on. */
struct gb_perf_event {
	const char *name;        /* "cpu-clock", "cycles", ... */
	uint32_t type;           /* PERF_TYPE_* */
	uint64_t config;
};

/* Look up an event by name; NULL if gebpf does not know it.  */
const struct gb_perf_event *gb_perf_event_find(const char *name);
/* Names gebpf knows, comma-separated (for messages and --help). */
const char *gb_perf_event_names(void);
/* 0 when the event can be opened for sampling on this machine, else -errno
 * (-ENOENT / -EOPNOTSUPP: no such hardware counter, e.g. no PMU). */
int gb_perf_event_probe(const struct gb_perf_event *ev);
/* The default: "cycles" where a hardware PMU exists, else "cpu-clock". */
const struct gb_perf_event *gb_perf_event_default(void);

#endif
