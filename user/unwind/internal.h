/* What unwind.c and names.c share: the unwinder's processes and files
 * (unwind.h is the interface). */
#ifndef GB_UNWIND_INTERNAL_H
#define GB_UNWIND_INTERNAL_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "unwind/unwind.h"

/* An ELF file shared by every process that maps it. */
struct elf_file {
	dev_t dev;
	ino_t ino;
	int fd;
	Elf *elf;
};

struct gb_unwinder;

/* One process: a live one (sampled), or an image (a snapshot). */
struct proc {
	pid_t pid;
	struct gb_unwinder *u;
	Dwfl *dwfl;                /* NULL when its maps could not be read */
	bool image;                /* modules and memory from gb_unwinder__add_image() */
	gb_unwind_read_fn read;    /* an image's memory */
	void *read_ctx;
	uint64_t reported_ns;      /* when /proc/PID/maps was last read (CLOCK_MONOTONIC) */
	uint64_t newest_ns;        /* the newest sample of the process seen */
	uint64_t maps_hash;        /* of its text then */
	bool exited;               /* its maps were found gone or empty: never read again */
	bool prepared;             /* gb_unwinder__prepare()d: refreshed while it lives */
	uint64_t keep_gen;         /* the keeper's text last applied (mapskeep.h) */
	uint64_t live_ns;          /* when maps read here were last applied */
	uint64_t watched_ns;       /* the sample time last told the keeper */
	char *exe;                 /* its executable then (/proc/PID/exe), NULL if unknown */
	struct gb_perfmap *jit;    /* its /tmp/perf-PID.map (names.c), opened at first use */
	/* The walk under way (for the callbacks). */
	const struct gb_user_regs *regs;
	const uint8_t *stack;      /* a sample's copied stack (live processes) */
	size_t len;
	gb_unwind_frame_cb on_frame;
	void *frame_ctx;
	int depth;                 /* frames seen so far */
	bool read_failed;          /* a read fell outside the copied stack */
};

struct gb_unwinder {
	Dwfl_Callbacks cbs;
	Dwfl_Callbacks image_cbs;  /* images: files opened by path (libdwfl's own) */
	bool nofile_raised;
	char *debuginfo_path;
	void *procs;               /* tsearch tree of struct proc, by pid */
	void *files;               /* tsearch tree of struct elf_file, by (dev, ino) */
	struct gb_mapskeep *keep;  /* the maps keeper (gb_unwinder__keep), or NULL */
	char build_id[2 * 64 + 1];
	char func[512];
	char *dem; size_t demcap;   /* a demangled name (names.c) */
};

/* The tsearch order of struct proc: by pid. */
int unw_cmp_proc(const void *a, const void *b);
/* Process pid, its maps read when it is new (NULL on ENOMEM). */
struct proc *unw_get_proc(struct gb_unwinder *u, pid_t pid);
/* The module holding addr, the maps read again when none does and a sample
 * was taken after the last read (unwind.c). */
Dwfl_Module *unw_module_of(struct proc *p, uint64_t addr);

#endif
