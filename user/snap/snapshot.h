/* A snapshot: vtrace's (vivisect's debugger) "picture of a process", as plain data.
 *
 * Captured from a stopped gb_tracee (capture.c), written as an ELF core with a
 * JSON note (core_write.c; the format is docs/snapshot-format.md) and read
 * back (core_read.c).  Nothing here depends on ptrace: a snapshot is a value
 * that code can build, query and change without a process or a file.
 *
 * Identifiers (pid, tids, ppid, pgrp, sid) are recorded as the process sees
 * them (the innermost pid namespace, as the kernel's own core dumps do).
 *
 * Functions that can fail return 0 or -errno and print one "gebpf: <what>:
 * <why>" line (common/log.h) naming the pid or the file; the memory
 * queries print only when given a what (NULL: quiet, the caller decides).
 */
#ifndef GB_SNAP_SNAPSHOT_H
#define GB_SNAP_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "common/page.h"

#define GB_SNAP_VERSION 1

struct gb_tracee;
struct gb_snap_src;
struct gb_snap_cow_plan;

struct gb_snap_frame {
	uint64_t pc, sp;
	char *symbol;              /* "main+0x1c", "module+0x1234", or NULL */
	char *function;            /* the function as gdb names it (C++ and Rust
				    * demangled) with its offset, or NULL outside one */
};

/* A thread's kernel state that is not registers, for resume (kstate.c).
 * Each part is valid when its GB_TS_* bit is in have: old snapshots and
 * targets under seccomp (nothing is injected into those) lack some. */
enum {
	GB_TS_NAME = 1 << 0,       /* name (/proc/PID/task/TID/comm) */
	GB_TS_ROBUST = 1 << 1,     /* robust_head/len (get_robust_list) */
	GB_TS_RSEQ = 1 << 2,       /* rseq_* (PTRACE_GET_RSEQ_CONFIGURATION) */
	GB_TS_TID_ADDR = 1 << 3,   /* clear_tid (injected prctl PR_GET_TID_ADDRESS) */
	GB_TS_ALTSTACK = 1 << 4,   /* ss_* (injected sigaltstack) */
	GB_TS_PENDING = 1 << 5,    /* pending (PTRACE_PEEKSIGINFO of its own queue) */
};
/* Queued signals kept per thread / per process: more are counted, not kept. */
#define GB_SNAP_NPEND 8
struct gb_snap_pending {
	uint32_t n, lost;
	uint8_t info[GB_SNAP_NPEND][128];     /* siginfo_t, queue order */
};
struct gb_snap_tstate {
	uint32_t have;
	char name[16];
	uint64_t robust_head, robust_len;     /* head 0: none registered */
	uint64_t clear_tid;                   /* set_tid_address / CLONE_CHILD_CLEARTID; 0: none */
	uint64_t rseq_addr;                   /* 0: not registered */
	uint32_t rseq_len, rseq_sig;
	uint64_t ss_sp, ss_size;
	int32_t ss_flags;                     /* SS_DISABLE: no alternate stack */
	struct gb_snap_pending pending;       /* signals queued for this thread */
};

struct gb_snap_thread {
	int32_t tid;
	struct user_regs_struct regs;        /* incl. fs_base, gs_base */
	struct user_fpregs_struct fpregs;    /* FXSAVE layout (NT_FPREGSET) */
	uint8_t *xstate;                     /* XSAVE area (NT_X86_XSTATE), may be NULL */
	size_t xstate_len;
	uint8_t siginfo[128];                /* the stop's siginfo (NT_SIGINFO), zero if none */
	int cursig;                          /* signal of the stop (0 for an interrupt) */
	uint64_t sigpend, sighold;           /* pending / blocked masks (signals 1..64) */
	struct gb_snap_frame *frames;        /* innermost first */
	size_t nframes;
	struct gb_snap_tstate ks;            /* kernel state for resume */
};

struct gb_snap_map {
	uint64_t start, end;       /* [start, end), page aligned */
	uint64_t pgoff;            /* offset into the mapped file */
	uint64_t inode;
	char perms[5];             /* "r-xp" */
	char *path;                /* "" for anonymous, "[stack]", "/usr/lib/..." */
	uint8_t *data;             /* end - start bytes, or NULL: not here (see live) */
	/* Filled by save/load: where the bytes are in the core, their sha256. */
	uint64_t core_off;
	char sha256[65];
	/* private to a capture: the bytes are still in the process (or its
	 * copy-on-write copy, or a scratch file) and are read when needed. */
	bool live;                 /* the map has bytes, read from the capture's source */
	bool sparse;               /* pages the process has not got are zero (pagemap) */
	bool spilled;              /* copied to the scratch file at spill_off */
	uint64_t spill_off;
	uint64_t failed;           /* pages that could not be read (stored as zeros) */
};

/* Whether the snapshot holds the bytes of m (in data, or still live). */
static inline bool gb_snap_map_has_bytes(const struct gb_snap_map *m)
{
	return m->data || m->live;
}

struct gb_snap_fdk;
struct gb_snap_fd {
	int fd;
	char *target;              /* readlink of /proc/PID/fd/N */
	uint32_t flags;            /* open flags (fdinfo "flags", octal there) */
	uint64_t pos;
	struct gb_snap_fdk *k;     /* the kernel object when it is not a file
				    * (snap/fdkind.h), or NULL */
};

struct gb_snap_var {
	char *key, *value;
};

struct gb_snap_meta {
	int32_t pid, tid;          /* tid: the thread that stopped (0 = none) */
	int64_t vt;                /* trace instruction index, -1 = none */
	char *point;               /* "attach", "at 0x401136", "after 100", "pc=0x...", "vt=5" */
	char *kernel;              /* uname release */
	char *arch, *platform;     /* "amd64", "linux" */
};

/* The process's kernel state that is not memory, for resume (kstate.c);
 * each part valid when its GB_PS_* bit is in have. */
enum {
	GB_PS_UMASK = 1 << 0,      /* /proc/PID/status Umask */
	GB_PS_CWD = 1 << 1,        /* /proc/PID/cwd */
	GB_PS_RLIMITS = 1 << 2,    /* prlimit */
	GB_PS_SIGACTS = 1 << 3,    /* injected rt_sigaction(sig, NULL, &old) */
	GB_PS_ITIMERS = 1 << 4,    /* injected getitimer */
	GB_PS_PENDING = 1 << 5,    /* pending (PTRACE_PEEKSIGINFO_SHARED) */
};
#define GB_SNAP_NRLIMITS 16
#define GB_SNAP_NSIG 64
struct gb_snap_sigact {            /* the kernel's struct sigaction (x86-64) */
	uint64_t handler, flags, restorer, mask;
};
struct gb_snap_itimer {            /* struct itimerval: interval, then value */
	uint64_t int_sec, int_usec, val_sec, val_usec;
};
struct gb_snap_pstate {
	uint32_t have;
	uint32_t umask;
	char *cwd;
	struct { uint64_t cur, max; } rlim[GB_SNAP_NRLIMITS];
	struct gb_snap_sigact sigact[GB_SNAP_NSIG];   /* signal n at [n - 1]; SIG_DFL = all 0 */
	struct gb_snap_itimer itimer[3];              /* ITIMER_REAL, _VIRTUAL, _PROF */
	uint32_t posix_timers;     /* timer_create timers (/proc/PID/timers): not restored */
	uint32_t children;         /* child processes (/proc/PID/task/TID/children): not restored */
	struct gb_snap_pending pending;  /* signals queued for the process */
};

/* What NT_PRPSINFO says. */
struct gb_snap_psinfo {
	char state;                /* /proc state letter: 't' under ptrace */
	int nice;
	uint32_t uid, gid;
	int32_t ppid, pgrp, sid;   /* 0 when outside the process's pid namespace */
	char fname[16];            /* comm */
	char psargs[80];           /* command line, NULs as spaces */
};

struct gb_snapshot {
	struct gb_snap_meta meta;
	struct gb_snap_psinfo ps;
	struct gb_snap_pstate pk;            /* kernel state for resume */
	char *exe;
	struct gb_snap_thread *threads;      /* index order: [0] is the first thread */
	size_t nthreads;
	struct gb_snap_map *maps;            /* address order, non-overlapping */
	size_t nmaps;
	struct gb_snap_fd *fds;              /* fd order */
	size_t nfds;
	uint8_t *auxv;
	size_t auxv_len;
	struct gb_snap_var *vars;            /* free-form key/values ("vars") */
	size_t nvars;
	size_t vars_cap;                     /* private: room in vars (0: exactly nvars) */
	/* private: backing storage */
	void *file_base;                     /* mmap of a loaded core */
	size_t file_len;
	bool owns_map_data;                  /* each map's data is its own mmap */
	struct gb_snap_src *src;             /* a capture's memory source (source.h) */
	bool unwound;                        /* frames filled */
};

/* Where a capture happens. */
struct gb_snap_point {
	pid_t tid;                 /* host tid of the thread that stopped (0 = none) */
	int64_t vt;                /* -1 = not in a trace */
	const char *point;         /* see gb_snap_meta.point */
};

/* How to capture. */
struct gb_snap_capture_opts {
	/* Give the memory a copy-on-write copy (an injected clone of the
	 * process that never runs) so that the caller can resume the target as
	 * soon as gb_snapshot_capture returns; the bytes are read from the copy
	 * by gb_snapshot_save.  When the process cannot fork, the capture falls
	 * back to reading the stopped process, says so in one line, and
	 * *forked is false: the target must then stay stopped until saved. */
	bool fork;
	const char *scratch_dir;   /* where MAP_SHARED / MADV_DONTFORK / WIPEONFORK
				    * bytes are copied during the freeze ("." if NULL) */
	/* Which maps are MADV_DONTFORK / WIPEONFORK, read before the process
	 * was stopped (cow.h: gb_snap_cow_plan__read); NULL: read during the
	 * freeze (slow for a big process). */
	const struct gb_snap_cow_plan *plan;
	bool forked;               /* out: the copy exists */
};

/* Capture every thread of t (all stopped) into a new snapshot.  Registers
 * and process state are read now; memory bytes when the snapshot is saved
 * or read (so without o->fork, the target must stay stopped until then).
 * Memory is never held whole: gb_snapshot_save copies it through a fixed
 * buffer.  The tracee is left exactly as it was (nothing is written to it
 * but the injected clone, whose registers are restored).  On error *out is
 * NULL.  o may be NULL (no fork). */
int gb_snapshot_capture(struct gb_tracee *t, const struct gb_snap_point *pt,
			struct gb_snapshot **out);
int gb_snapshot_capture_opts(struct gb_tracee *t, const struct gb_snap_point *pt,
			     struct gb_snap_capture_opts *o, struct gb_snapshot **out);

/* Copy len bytes at addr (may cross maps).  -EFAULT when a byte is in no map,
 * -ENODATA when its map has no bytes (unreadable at capture); with one
 * "gebpf: WHAT: <why>" line when what is not NULL. */
int gb_snapshot_read_memory(const struct gb_snapshot *s, uint64_t addr, void *buf, size_t len,
			    const char *what);
int gb_snapshot_write_memory(struct gb_snapshot *s, uint64_t addr, const void *buf, size_t len,
			     const char *what);
/* Registers of thread index i, or NULL. */
const struct user_regs_struct *gb_snapshot_regs(const struct gb_snapshot *s, size_t i);
/* The map holding addr, or NULL. */
const struct gb_snap_map *gb_snapshot_find_map(const struct gb_snapshot *s, uint64_t addr);

/* Write as an ELF core, mode 0600: an unnamed file (O_TMPFILE) linked into
 * place once complete and fsynced, so that a kill leaves nothing (where the
 * filesystem lacks O_TMPFILE: a temporary name, renamed).  A captured
 * snapshot's memory is copied from its source here (the copy-on-write copy
 * lives until gb_snapshot_free).  Times of the copy and the sync phases go
 * to *st when not NULL. */
struct gb_snap_save_stats {
	bool interruptible;        /* in: a Ctrl-C/SIGTERM (common/sigflag.h) ends
				    * the copy, -EINTR and no file (gebpf snap) */
	double copy_s, sync_s;
	uint64_t bytes, written;   /* map bytes, and non-zero bytes written */
};
int gb_snapshot_save(struct gb_snapshot *s, const char *path);
int gb_snapshot_save_stats(struct gb_snapshot *s, const char *path, struct gb_snap_save_stats *st);
/* Read the core at path.  On error, one "gebpf: WHAT: PATH: <why>" line
 * (what: the command's context, e.g. "show"; NULL: "gebpf: PATH: <why>"). */
int gb_snapshot_load(const char *path, struct gb_snapshot **out, const char *what);
void gb_snapshot_free(struct gb_snapshot *s);

/* The pid of the copy-on-write copy the bytes are read from (0: none). */
pid_t gb_snapshot_source_pid(const struct gb_snapshot *s);

/* Set (or replace) a var. */
int gb_snapshot_set_var(struct gb_snapshot *s, const char *key, const char *value);

/* Internal helpers shared by the snap room. */
struct gb_snapshot *gb_snapshot_alloc(void);
/* Fill every thread's frames by unwinding the snapshot itself (libdw);
 * threads that cannot be unwound keep the frames they could get. */
void gb_snapshot_unwind(struct gb_snapshot *s);

#endif
