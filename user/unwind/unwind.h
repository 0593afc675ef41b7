/* DWARF unwinding and symbolization of user stacks (elfutils libdwfl):
 * sampled ones, and a snapshot's threads (images, below); naming of kernel
 * addresses is kallsyms.h.
 *
 * A sample brings the user registers and a copy of the top of the user
 * stack (bpf/sample.bpf.c).  gb_unwinder__unwind() walks it with libdwfl's
 * frame unwinder, which reads the CFI of each module (.eh_frame, else
 * .debug_frame) and, through our callbacks, registers and stack words from
 * the copy only: a frame whose data lies above the copied bytes ends the
 * walk (truncated).  A walk that reaches the outermost frame (_start, a
 * thread's start, where the CFI marks the return address undefined)
 * without needing a byte beyond the copy is complete.
 *
 * Per process, one Dwfl made from /proc/PID/maps (read again when a pc of a
 * sample taken after the last read falls outside every module: a library
 * loaded later; rebuilt only when the maps changed; kept as it is when the
 * process has exited, whose maps are empty or unreadable: its samples still
 * queued were taken with those modules);
 * per file (device, inode), one ELF handle shared by every process that maps
 * it, so a long run or a whole-system run opens each file once.  Files are
 * opened when the maps are read, while the process lives (through
 * /proc/PID/root, which a dead process no longer has), not when first
 * needed.  Names come
 * from .symtab, .dynsym, the .gnu_debugdata mini debuginfo, and separate
 * debug files (sym/debugfile.h: the lookup --range and snap --at use too,
 * so a frame and a range name a function alike), which also give
 * file:line.
 *
 *   struct gb_unwinder *u = gb_unwinder__new();
 *   n = gb_unwinder__unwind(u, pid, tid, regs, stack, len, pcs, 128, &complete);
 *   gb_unwinder__describe(u, pid, pcs[i], i > 0, &info);
 *   gb_unwinder__free(u);
 *
 * An image is a process known only from a copy of it (a snapshot,
 * user/snap/stack.c): its maps as /proc/PID/maps text (libdwfl's own
 * reporting, files opened by path as this host has them) and a callback that
 * reads its memory.  Every thread of it is walked with full registers:
 *
 *   gb_unwinder__add_image(u, pid, maps, len, read, ctx);
 *   gb_unwinder__walk(u, pid, tid, regs, on_frame, ctx);
 *   gb_unwinder__symbol(u, pid, f->pc, !f->activation, &info);
 */
#ifndef GB_UNWIND_UNWIND_H
#define GB_UNWIND_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gebpf_events.h"

struct gb_unwinder;

/* What an address is.  Strings belong to the unwinder (valid until free);
 * NULL when unknown. */
struct gb_frame_info {
	const char *func;          /* function name: the symbol without a @version, C++ and
				    * Rust names demangled ("node::Start(int, char**)");
				    * valid until the next call */
	const char *sym;           /* the symbol as the ELF names it ("memcpy@@GLIBC_2.14",
				    * "_ZN4node5StartEiPPc") */
	uint64_t func_off;         /* addr - symbol start */
	const char *module;        /* path of the mapped file */
	const char *build_id;      /* lower-case hex, NULL if the file has none */
	uint64_t mod_start, mod_end;   /* the module's run-time address range */
	const char *file;          /* source file (debug info only) */
	int line;                  /* 0 when unknown */
};

/* NULL on ENOMEM.  The first live process it reads raises this process's
 * soft open-file limit to the hard one (every ELF file used stays open):
 * use it after forking any child that should keep the limit it was given
 * (an unwinder of images only leaves the limit alone). */
struct gb_unwinder *gb_unwinder__new(void);
void gb_unwinder__free(struct gb_unwinder *u);

/* Unwind one sample of thread tid of process pid.  pcs[0] = regs->ip, then
 * return addresses, at most max.  Returns the number of frames (>= 1), and
 * *complete = the walk reached the outermost frame. */
int gb_unwinder__unwind(struct gb_unwinder *u, pid_t pid, pid_t tid,
			const struct gb_user_regs *regs, const uint8_t *stack, size_t len,
			uint64_t *pcs, int max, bool *complete);

/* Describe a user address of pid; ret = it is a return address (named by
 * the call before it).  0, or -ENOENT when no mapped file holds it (then
 * only the fields known are set). */
int gb_unwinder__describe(struct gb_unwinder *u, pid_t pid, uint64_t addr, bool ret,
			  struct gb_frame_info *fi);

/* describe() without the source line: no debug line tables read (a
 * module's DWARF, compressed in an unstripped build, can take seconds to
 * read the first time: a profile asks for the lines when it is written). */
int gb_unwinder__identify(struct gb_unwinder *u, pid_t pid, uint64_t addr, bool ret,
			  struct gb_frame_info *fi);

/* The source file of addr's line (and *line), what describe() adds to
 * identify(); NULL when unknown. */
const char *gb_unwinder__source(struct gb_unwinder *u, pid_t pid, uint64_t addr, bool ret,
				int *line);

/* describe() without the build id and the source line (no debug line
 * tables read): func, sym, func_off, module and its range. */
int gb_unwinder__symbol(struct gb_unwinder *u, pid_t pid, uint64_t addr, bool ret,
			struct gb_frame_info *fi);

/* A frame of a walk, innermost first: its pc (frame 0: the registers' ip),
 * whether pc is executing (activation) rather than a return address, and
 * its stack pointer (frame 0: the registers' sp; 0 when unknown). */
struct gb_unwind_frame {
	uint64_t pc, sp;
	bool activation;
};
/* Return true to go on to the caller's frame. */
typedef bool (*gb_unwind_frame_cb)(void *ctx, const struct gb_unwind_frame *f);
/* Read the 8-byte word at addr of an image; false when it has none. */
typedef bool (*gb_unwind_read_fn)(void *ctx, uint64_t addr, uint64_t *word);

/* Make pid an image: maps[0..len) in /proc/PID/maps form, memory through
 * read(ctx, ...) (ctx must outlive the unwinder's use of pid).  0; -EEXIST
 * when pid is known already; -ENOMEM; -ENOENT when libdwfl can take no
 * module from the maps (walks then fail, names are unknown). */
int gb_unwinder__add_image(struct gb_unwinder *u, pid_t pid, const char *maps, size_t len,
			   gb_unwind_read_fn read, void *ctx);
/* Walk thread tid of image pid from regs, calling cb for each frame.  0;
 * -ENOENT when pid is no image that has modules; -EIO when libdwfl stopped
 * on an error (after the frames it gave). */
int gb_unwinder__walk(struct gb_unwinder *u, pid_t pid, pid_t tid, const struct gb_user_regs *regs,
		      gb_unwind_frame_cb cb, void *ctx);

/* A sample of pid taken at ns (CLOCK_MONOTONIC, bpf_ktime_get_ns()) is
 * about to be unwound and named: its pcs may lie in modules mapped after
 * the last read of the maps.  Call before unwind/describe. */
void gb_unwinder__sample_time(struct gb_unwinder *u, pid_t pid, uint64_t ns);

/* The executable of pid (/proc/PID/exe) when its maps were last read, as
 * its maps name it; NULL if pid is unknown or its maps were never read. */
const char *gb_unwinder__exe(struct gb_unwinder *u, pid_t pid);

/* Forget the processes that have exited and whose newest sample was taken
 * before before_ns (CLOCK_MONOTONIC): their modules and names, so that a
 * run of hours over short-lived processes stays bounded.  The ELF files
 * stay open (shared, one per file).  Returns how many were forgotten. */
size_t gb_unwinder__forget(struct gb_unwinder *u, uint64_t before_ns);

/* Read again the maps of every live process last read more than every_ns
 * ago (CLOCK_MONOTONIC) that was prepared or had a sample in the last
 * active_ns: a consumer that falls behind its samples still sees the
 * libraries a process maps before it exits (an exited process's maps are
 * empty, and its queued samples would be named by the maps read at its
 * start).  Reads only /proc/PID/maps unless it changed.  Returns how many
 * were read. */
size_t gb_unwinder__refresh(struct gb_unwinder *u, uint64_t every_ns, uint64_t active_ns);
/* Start a maps keeper (unwind/mapskeep.h): a thread that reads those maps
 * every every_ns whatever the consumer is doing, so that a process gone
 * before its samples are named (the consumer seconds behind) is named by
 * the maps it last had; gb_unwinder__refresh then applies the keeper's
 * texts instead of reading itself.  0, or -errno (then refresh reads). */
int gb_unwinder__keep(struct gb_unwinder *u, uint64_t every_ns, uint64_t active_ns);

/* How many processes the unwinder keeps (their modules and names). */
size_t gb_unwinder__nprocs(const struct gb_unwinder *u);

/* Read the modules of pid now (e.g. right after a launched command's exec)
 * so that its samples can be named even if it exits soon. */
void gb_unwinder__prepare(struct gb_unwinder *u, pid_t pid);

#endif
