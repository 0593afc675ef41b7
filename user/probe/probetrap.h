/* The probe trap: uprobes with a BPF program (bpf/probetrap.bpf.c) that stop
 * a thread of one process when it enters a traced range at one of the
 * probed addresses, and hand its registers from BEFORE the probed
 * instruction to the tracer.  docs/bpf.md ("The probe trap") says what the
 * program records and what it costs; this comment is the engine's contract.
 * Proved on 6.18 by tests/unit/test_probetrap.c and test_probetrap_life.c;
 * points 1-3 (endbr64, push, mov, call, jmp, nop entries) also on 5.10, 6.1
 * and 6.12 by the kernel matrix's probe check (scripts/kmatrix.d/probecheck.c).
 *
 *   struct gb_probetrap *p = gb_probetrap__new(&(struct gb_probetrap_opts){
 *           .tgid = pid });                       // loads; no probes yet
 *   gb_probetrap__add_many(p, "/usr/lib/x86_64-linux-gnu/libc.so.6", offs, n);
 *   ... PTRACE_CONT the threads; at a signal-delivery-stop of tid with sig:
 *   struct gb_probe_hit hit;
 *   if (gb_probetrap__claim(p, tid, sig, &si, &hit)) {
 *           // gebpf's: suppress sig (restart with signal 0).  The thread
 *           // already ran the probed instruction: hit.regs is the state
 *           // before it, the stop's registers the state after it.
 *           gb_probe_hit__complete(&hit, &regs_at_stop);
 *           gb_probetrap__set_stepping(p, tid, true);   // before stepping on
 *   }
 *   gb_probetrap__free(p);                       // every uprobe gone
 *
 * THE CONTRACT (what the engine can rely on)
 *
 * 1. A thread NOT in "stepping" that reaches a probed address f, running
 *    natively (PTRACE_CONT), is stopped by a signal-delivery-stop for
 *    opts.signo (default SIGURG), si_code SI_KERNEL, AFTER the probed
 *    instruction completed: at f + its length, or at the call/jmp target
 *    (the kernel stepped it out of line or emulated it: the tracer cannot
 *    tell which; the stop's registers and memory are the state after the
 *    instruction, e.g. a call's return address is pushed).  No other stop
 *    comes between.  hit.addr == hit.regs.rip == f.  If the thread blocks
 *    signo or has it pending already, the stop is a signal-delivery-stop
 *    for SIGWINCH instead, or where it blocks or has that pending too for
 *    SIGSTOP (hit.flags GB_PROBE_HIT_SIGSTOP), same place.
 *    claim() returns true for exactly these stops; the engine restarts the
 *    thread with signal 0 (never delivers them).  Signals it returns false
 *    for are the program's: deliver them as usual.
 * 2. A thread IN "stepping" gets no record and no signal from any probe.
 *    PTRACE_SINGLESTEP from a probed address f ends in ONE stop, after the
 *    instruction (the same place and state as without the probe), but that
 *    stop is a SIGTRAP which uprobes sends itself (si_code SI_USER, si_pid
 *    = the tracee's tgid) instead of the debug trap (si_code TRAP_TRACE,
 *    2).  gb_probetrap__is_step_artifact() says true for it: treat it as
 *    the step's stop and never deliver it.  No second stop follows.  So:
 *    mark a thread stepping before the first PTRACE_SINGLESTEP of a
 *    stretch and unmark it before PTRACE_CONT; a thread left marked runs
 *    through probes unseen.
 * 3. Memory read at a probed address (process_vm_readv, /proc/PID/mem)
 *    shows the int3 (0xCC): decode from a buffer passed through
 *    gb_probetrap__orig_bytes(), which puts the file's bytes back.
 * 4. Probes fire only for threads of opts.tgid: a fork or vfork child
 *    hitting a probed address runs on untouched, as does any other process
 *    mapping the file.  Probes attach by path and file offset: added
 *    before the file is mapped (a library dlopened later, an image exec'd
 *    later, through env), they fire once the process maps it; after an
 *    exec made by a thread other than the main one only once they are
 *    attached again (gb_probetrap__reattach).
 * 5. The kernel refuses some instructions (int3, LOCK-prefixed ones):
 *    add() on a mapped file fails with -ENOTSUP; on a file mapped later the
 *    kernel skips the probe silently.  Use the page trap for such entries.
 * 6. Crash safety: every uprobe hangs on a descriptor of this process;
 *    when gebpf dies (even by SIGKILL) they vanish and the target runs on
 *    natively.  A signal already sent and not yet delivered then reaches
 *    the program: SIGURG's and SIGWINCH's default action is to ignore it
 *    (harmless unless the program handles them: Go's runtime takes a
 *    spurious SIGURG as it is made to); the SIGSTOP fallback, only for a
 *    thread that blocks or has pending both (inside a signal handler that
 *    blocks every signal), stops the process (`kill -CONT` resumes it).
 *
 * 7. Redirects (opts.redirect, where gb_probetrap__redirects() says the
 *    kernel allows them: upstream 6.18, not every build): a thread of
 *    redirect_thread() hitting an address of redirect_add() while
 *    redirect_enable() is on gets NO record and NO signal: the program
 *    sets its ip to the address's target
 *    and the kernel neither steps nor emulates the probed instruction; the
 *    thread goes on at the target with every other register as before the
 *    instruction (an instruction the target runs itself).  Others hit as
 *    in 1.  What makes the load check enough: docs/bpf.md "Redirects".
 *
 * Needs root (CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN for uprobes), uprobes,
 * kernel BTF, BPF ring buffers and bpf_send_signal_thread (Linux 5.8).
 */
#ifndef GB_PROBE_PROBETRAP_H
#define GB_PROBE_PROBETRAP_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

struct gb_probetrap_opts {
	pid_t tgid;              /* the process whose threads are stopped */
	int signo;               /* stop signal; 0 = SIGURG */
	bool quiet;              /* no "gebpf: warning: ..." line when unavailable */
	bool silent;             /* no -v line either (a helper's own probe, which
				  * says what it did: gb_xol_reserve (trace/xol.h)) */
	bool redirect;           /* make redirects (contract 7) where the kernel can;
				  * GEBPF_PROBETRAP_NOREDIRECT=1 says it cannot */
};

#define GB_PROBE_HIT_SIGSTOP 1u  /* the stop was SIGSTOP (signo blocked or pending) */
#define GB_PROBE_HIT_LOST 2u     /* the record was lost (ring full): regs unknown, addr 0 */
#define GB_PROBE_HIT_TAKEN 4u    /* the record was taken early (take_early): only
				  * the signal was left to swallow; no hit */

struct gb_probe_hit {
	uint64_t addr;           /* the probe's runtime address (= regs.rip) */
	/* The state before the probed instruction: the 16 GPRs, orig_rax, rip,
	 * cs, eflags, rsp, ss.  fs_base, gs_base, ds, es, fs, gs are 0 (the
	 * program cannot read them): gb_probe_hit__complete() copies them
	 * from the stop's registers. */
	struct user_regs_struct regs;
	uint32_t flags;          /* GB_PROBE_HIT_* */
	uint64_t ns;             /* CLOCK_MONOTONIC of the hit */
	uint32_t cpu;
};

struct gb_probetrap_stats {
	uint64_t hits;           /* hits by the process's threads */
	uint64_t stepping;       /* of those, by threads in "stepping" (ignored) */
	uint64_t records;        /* records written */
	uint64_t lost;           /* records lost (ring buffer full) */
	uint64_t signals;        /* stop signals sent */
	uint64_t sigstops;       /* of those, SIGSTOP */
	uint64_t alts;           /* of those, SIGWINCH (signo blocked or pending) */
	uint64_t nosignal;       /* hits that sent no signal (pending map full) */
	uint64_t other;          /* hits of other processes (filtered out) */
	uint64_t muted;          /* hits of removed probes still installed */
	uint64_t redirects;      /* hits redirected (contract 7: no record, no signal) */
	uint64_t claimed;        /* stops claim() owned */
	unsigned probes;         /* probes attached now (not removed) */
	bool multi;              /* attached as uprobe_multi links */
	uint32_t prog_id;        /* the BPF program's id (bpftool prog show id N) */
};

struct gb_probetrap;

/* Load the program (no probes yet).  NULL when BPF or uprobes are
 * unavailable; a "gebpf: warning: probe trap: ..." line says why unless
 * quiet. */
struct gb_probetrap *gb_probetrap__new(const struct gb_probetrap_opts *o);
/* Load a trap for o now (before the target is stopped: the load and its
 * feature checks take tens of ms): the next gb_probetrap__new with the same
 * tgid, signo and redirect gets it.  unprepare frees one not taken. */
void gb_probetrap__prepare(const struct gb_probetrap_opts *o);
void gb_probetrap__unprepare(void);
/* Probe the instruction at file_offset of the file at path (for the
 * process's threads only).  The file need not be mapped yet.  0, -EEXIST
 * (already probed), or -errno from the kernel; -EMFILE raises the soft
 * open-file limit to the hard one once and retries (each probe holds one
 * perf-event descriptor).  A file that is mapped now and whose instruction
 * the kernel cannot probe fails here with -ENOTSUP/-EINVAL; when mapped
 * later the kernel refuses silently: probe only instruction starts. */
int gb_probetrap__add(struct gb_probetrap *p, const char *path, uint64_t file_offset);
/* Probe n offsets of one file at once (the engine's entries of a range):
 * all or none.  With uprobe_multi (Linux 6.10+) they share one link, which
 * the kernel removes in one go (see free); the kernel's error then names
 * no offset: add them one by one to find a refused instruction. */
int gb_probetrap__add_many(struct gb_probetrap *p, const char *path, const uint64_t *offs,
			   size_t n);
/* Remove one probe: 0 or -ENOENT.  Its hits stop at once.  With
 * uprobe_multi its int3 stays (hits do nothing) until every probe of its
 * add call is removed, or free; adding it again re-enables it at no cost.
 * Without uprobe_multi it is detached (slow: see free). */
int gb_probetrap__remove(struct gb_probetrap *p, const char *path, uint64_t file_offset);
/* Thread tid is (on) or is no longer (off) single-stepped by gebpf: its
 * hits do nothing while on. */
void gb_probetrap__set_stepping(struct gb_probetrap *p, pid_t tid, bool on);
/* At a signal-delivery-stop of thread tid with signal sig (si from
 * PTRACE_GETSIGINFO, or NULL): true when the stop is gebpf's (contract 1),
 * with hit filled.  The engine then suppresses sig. */
bool gb_probetrap__claim(struct gb_probetrap *p, pid_t tid, int sig, const siginfo_t *si,
			 struct gb_probe_hit *hit);
/* Thread tid stopped for a signal of the program's own (sig != signo)
 * while a probe's signal may still be queued behind it (signals are
 * delivered lowest number first): take the probe's record now, if one is
 * queued for tid.  Its signal, when its stop comes, is claimed with
 * GB_PROBE_HIT_TAKEN and nothing else.  true with hit filled. */
bool gb_probetrap__take_early(struct gb_probetrap *p, pid_t tid, struct gb_probe_hit *hit);
/* The stop after PTRACE_SINGLESTEP of a thread from rip_before: true when
 * it is uprobes' SIGTRAP that ends a step over a probed address (contract
 * 2), i.e. the step's own stop: do not deliver it. */
bool gb_probetrap__is_step_artifact(struct gb_probetrap *p, pid_t tid, uint64_t rip_before,
				    int sig, const siginfo_t *si);
/* Copy from regs at the stop what the BPF program cannot see
 * (fs_base, gs_base, ds, es, fs, gs): no probed instruction changes them
 * except wrfsbase/wrgsbase/mov-to-segment, which the engine must not take
 * from a probe. */
void gb_probe_hit__complete(struct gb_probe_hit *hit, const struct user_regs_struct *at_stop);
/* buf holds len bytes read from the process at runtime address addr: put
 * back the original byte at every probed address inside.  Returns how many
 * bytes were restored (0 when none is probed), or -errno. */
int gb_probetrap__orig_bytes(struct gb_probetrap *p, uint64_t addr, uint8_t *buf, size_t len);
/* The process's mappings changed (exec, dlopen, munmap): runtime addresses
 * are looked up again at the next need.  Hits at unknown addresses do this
 * by themselves. */
void gb_probetrap__maps_changed(struct gb_probetrap *p);
/* An exec made by a thread other than the main one: the kernel filters a
 * probe's hits by the memory of the task it was attached for (the main
 * thread's, whose pid the exec'ing thread took), which died with the old
 * image, so the new image would never be probed.  Attach every probe again
 * for the process as it is now (its one thread stopped).  0 or -errno. */
int gb_probetrap__reattach(struct gb_probetrap *p);
/* Thread tid exited: forget its stepping mark, queued records, counts. */
void gb_probetrap__forget(struct gb_probetrap *p, pid_t tid);
/* Descriptor that becomes readable when records are queued in the
 * kernel, and the drain that moves them to user space (claim drains by
 * itself).  drain returns the number of records moved, or -errno. */
int gb_probetrap__poll_fd(const struct gb_probetrap *p);
int gb_probetrap__drain(struct gb_probetrap *p);
void gb_probetrap__stats(const struct gb_probetrap *p, struct gb_probetrap_stats *s);
/* Contract 7 (redirect.c).  redirects: loaded with them (opts.redirect and
 * the kernel lets the program write ip).  add: hits at run-time address
 * addr go on at target (0 or -errno; -ENOTSUP without redirects).  thread:
 * tid may be redirected (on) or not.  enable: redirects are made (on) or
 * not; off before the targets go away (every thread stopped: none is in
 * the program then). */
bool gb_probetrap__redirects(const struct gb_probetrap *p);
int gb_probetrap__redirect_add(struct gb_probetrap *p, uint64_t addr, uint64_t target);
void gb_probetrap__redirect_thread(struct gb_probetrap *p, pid_t tid, bool on);
void gb_probetrap__redirect_enable(struct gb_probetrap *p, bool on);
/* From now on hits do nothing (no record, no signal); the int3s stay until
 * free.  free disarms first; call it yourself before PTRACE_DETACH if the
 * free comes later. */
void gb_probetrap__disarm(struct gb_probetrap *p);
/* Hits of the traced process since it was disarmed (each ran nothing). */
uint64_t gb_probetrap__disarmed_hits(const struct gb_probetrap *p);
/* Disarm, detach every probe and unload.  Each detach waits for the
 * kernel's grace periods: without uprobe_multi (before 6.10) about 0.1 s per
 * probe on the 2-CPU test VM (serialised in the kernel: detaching from
 * several threads at once did not help); with it, about the same per
 * add/add_many call, however many probes it added. */
void gb_probetrap__free(struct gb_probetrap *p);

#endif
