/* Inside the probe trap (probetrap.c: lifecycle and stops; probeset.c: the
 * probes, their original bytes and runtime addresses).  Not for other rooms:
 * the API is probetrap.h. */
#ifndef GB_PROBE_PROBETRAP_INT_H
#define GB_PROBE_PROBETRAP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gebpf_events.h"
#include "probe/probetrap.h"

struct bpf_link;
struct ring_buffer;
struct probetrap_bpf;

struct probetrap_probe {
	char *path;                  /* as given */
	char *real;                  /* realpath (matched against /proc/PID/maps) */
	dev_t dev;
	ino_t ino;
	uint64_t off;
	uint8_t orig;                /* the file's byte at off (the int3 replaces it) */
	uint64_t id;                 /* cookie (uprobe_multi) */
	bool muted;                  /* removed; its int3 stays until its group goes */
	int group;                   /* index in groups (uprobe_multi), else -1 */
	struct bpf_link *link;       /* its perf-event uprobe (no uprobe_multi) */
};

/* One uprobe_multi link: the probes of one add call. */
struct group {
	int fd;                      /* -1 once closed */
	unsigned live;               /* its probes not removed */
};

/* A probe's runtime address in the current address space. */
struct rt {
	uint64_t addr;
	uint8_t orig;
};

struct gb_probetrap {
	struct probetrap_bpf *skel;
	struct ring_buffer *rb;
	pid_t tgid;
	int signo;
	int alt;                 /* the next choice when signo is blocked or pending (0: none) */
	bool multi;                  /* uprobe_multi links (6.10+), else perf events */
	bool silent;                 /* opts.silent: no -v lines */
	bool redirect;               /* loaded with redirects (redirect.c) */
	bool btf_cut;                /* loaded with the cached cut of the kernel's BTF (btfmin.c) */
	struct probetrap_probe *pr;
	size_t npr, capr;
	struct group *gr;
	size_t ngr, capgr;
	uint64_t next_id;
	struct rt *rt;               /* sorted by addr; valid while rt_valid */
	size_t nrt;
	bool rt_valid;
	uint64_t *plain;             /* int3s of the program's own (orig_bytes) */
	size_t nplain, capplain;
	struct gb_ev_probe *q;       /* drained records not yet claimed, oldest first */
	size_t nq, capq;
	uint64_t claimed;
	uint64_t consumed;            /* records on_record() took from the ring */
	struct owed { pid_t tid; int signo; } *owed; /* records taken early: their
						       * signals are still to come */
	size_t nowed, capowed;
	bool nofile_raised;
};

/* probeset.c */
bool gb_probetrap_is_probed(struct gb_probetrap *p, uint64_t runtime_addr);
unsigned gb_probetrap_live_probes(const struct gb_probetrap *p);
void gb_probetrap_detach_all(struct gb_probetrap *p);

#endif
