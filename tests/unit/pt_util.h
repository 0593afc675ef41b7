/* Harness of tests/unit/test_probetrap*.c (and the gated child of
 * test_protwatch.c): fork a child that runs a function after a pipe
 * handshake, seize it, attach a probe trap with the given
 * probes, and record every signal stop (claimed or not) to the child's exit.
 * Optionally single-step the thread through [step_from, step_until) once a
 * hit at step_from is claimed (the thread marked "stepping"). */
#ifndef PT_UTIL_H
#define PT_UTIL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "probe/probetrap.h"

#define PT_MAXPROBES 32
#define PT_MAXSTOPS 64
#define PT_MAXSTEPS 512

struct pt_stop {
	pid_t tid;
	int sig, code, from_pid;
	bool claimed;
	struct gb_probe_hit hit;
	struct user_regs_struct regs;   /* at the stop */
};

struct pt_step {
	uint64_t rip_before, rip_after;
	int sig, code, from_pid;
	bool artifact;                  /* gb_probetrap__is_step_artifact */
	struct user_regs_struct regs;   /* after the step */
};

struct pt_run;
typedef void (*pt_hook)(struct pt_run *r, pid_t pid);

struct pt_run {
	struct { char path[PATH_MAX]; uint64_t off; } probe[PT_MAXPROBES];
	int nprobes;
	int signo;                      /* 0 = SIGURG */
	unsigned ptrace_opts;           /* PTRACE_SEIZE options */
	pt_hook before_gate;            /* probes attached, child waiting */
	/* at every claimed stop, before the thread resumes */
	void (*on_claim)(struct pt_run *r, pid_t tid, struct pt_stop *s);
	void *ctx;
	uint64_t step_from, step_until; /* step this stretch (0: never) */
	bool drain_first;               /* poll + drain before each claim */
	int drained;                    /* records those drains moved */
	/* results */
	struct gb_probetrap *trap;      /* valid in the hooks only */
	struct pt_stop stops[PT_MAXSTOPS];
	int nstops;                     /* all of them; the first PT_MAXSTOPS kept */
	struct pt_step steps[PT_MAXSTEPS];
	int nsteps;
	int exit_code, term_sig;
	struct gb_probetrap_stats stats;
};

/* Skip (with the reason) without root, uprobes, BTF, BPF ring buffers. */
void pt_need(void);
void pt_run_init(struct pt_run *r);
/* Probe the instruction at addr of this process's own mapped file. */
void pt_probe_self(struct pt_run *r, uint64_t addr);
void pt_probe_file(struct pt_run *r, const char *path, uint64_t off);
/* Fork, run fn(arg) in the child, trace it to its end. */
void pt_run(struct pt_run *r, void (*fn)(void *), void *arg);
/* Fork a child that runs fn(arg), then exits 0, once pt_gate_open(*gate)
 * is called; the caller traces it (PTRACE_SEIZE with ptrace_opts). */
pid_t pt_fork_gated(void (*fn)(void *), void *arg, unsigned ptrace_opts, int *gate);
void pt_gate_open(int gate);
/* <dir of the unit-test binary>/progs/NAME, or skip when it is not built. */
void pt_prog_path(const char *name, char *buf, size_t len);
/* File offset of an ELF file's entry point / of a dynamic symbol. */
uint64_t pt_elf_entry_off(const char *path);
uint64_t pt_elf_sym_off(const char *path, const char *sym);
/* Lines of tracefs uprobe_events naming pid's libbpf probes (libbpf's
 * legacy attach writes "libbpf_PID_..." there); -1 without tracefs. */
long pt_legacy_uprobes(pid_t pid);

#endif
