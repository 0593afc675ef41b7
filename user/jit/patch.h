/* The patch planner of the stop-free mode (docs/trace.md "A trap without
 * stops (in progress)"): pure logic, no process.  Given the range's entry
 * addresses (sym/entries.c), its instructions (decoded in order, from the
 * file's bytes) and the permissions of its pages, decide for each entry
 * whether a 5-byte `jmp rel32` to its entry block may replace its first
 * bytes (never where another entry, an internal branch target or a known
 * code address falls in bytes 1..4) (the instructions it covers then run only as their translated
 * copies in the cache) or whether it keeps a uprobe, and why.
 *
 * An entry whose 5 bytes cannot hold the jump (another entry or a target at
 * +3, glibc's memmove and mempcpy's shared tail) may still take a 2-byte `jmp
 * rel8` to a trampoline: a `jmp rel32` to its entry block written over the
 * nop padding that falls into the entry (the alignment before a function or
 * a label), within 126 bytes before it.  The trampoline only stands for
 * those nops: a thread that falls through them (a _chk function before its
 * function) goes to the entry as it would; one at the trampoline after the
 * short jump, with the bytes written back, runs the nops into the entry
 * again.  So nothing else may reach a byte of it, and it starts at an
 * instruction boundary of the nops (gb_patch_in.pre: the caller knows one
 * before the range; inside it the decode does).
 *
 *   struct gb_patch_plan pl;
 *   gb_patch_plan(&in, &pl);
 *   for each pl.v[i] with .why == GB_PATCH_OK:
 *           gb_patch_set_target(&pl.v[i], gb_jit__entry(j, pl.v[i].addr, ...));
 *           write .bytes at .addr; to undo, write .orig
 *   gb_patch_plan_free(&pl);
 */
#ifndef GB_JIT_PATCH_H
#define GB_JIT_PATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decode/decode.h"

#define GB_PATCH_LEN 5        /* jmp rel32 */
#define GB_PATCH_SHORT_LEN 2  /* jmp rel8, to a trampoline */
#define GB_PATCH_PAD_MAX 126  /* how far before its entry a trampoline may begin */

enum gb_patch_why {
	GB_PATCH_OK,            /* patch it */
	GB_PATCH_ENTRY_INSIDE,  /* another entry falls inside its 5 bytes */
	GB_PATCH_CANNOT_MOVE,   /* an instruction under the 5 bytes is not translated
				 * (the step engine runs it at its own address) or has
				 * an operand or target the cache cannot reach */
	GB_PATCH_WRITABLE,      /* the 5 bytes are on a writable (or unknown) page */
	GB_PATCH_SHORT,         /* the range ends inside the 5 bytes */
	GB_PATCH_FAR,           /* the cache is out of a rel32's reach */
	GB_PATCH_NOT_INSN,      /* the entry is not an instruction start of the range */
	GB_PATCH_TARGET_INSIDE, /* bytes 1..4 hold the target of a direct branch or
				 * call of the range, or a known code address of it
				 * (gb_patch_in.codeptrs): code running natively from
				 * the original bytes (an in-range miss, a thread not
				 * its area's owner) would land inside the jmp */
	GB_PATCH_SYSCALL_INSIDE, /* a system call under the 5 bytes is not the last
				  * instruction there: without gebpf its thread goes
				  * on natively after it (docs/trace.md "Harmless
				  * without gebpf"), inside the jmp */
	GB_PATCH_NO_NATIVE,     /* (need_native) the instructions under the 5 bytes
				 * cannot run from a copy (jit/reloc.h): a thread
				 * would have no way on once gebpf is gone */
	/* Reasons for the 2-byte form, when the 5-byte one failed (why_other). */
	GB_PATCH_NO_PAD,        /* no 5 bytes of nops falling into it within reach */
	GB_PATCH_SHORT_INSIDE,  /* an entry or a target at +1 (inside the 2 bytes) */
};

/* Permissions of [lo, hi) (the maps of the range's pages). */
struct gb_patch_map { uint64_t lo, hi; bool writable; };

struct gb_patch_in {
	uint64_t start, end;                  /* the range, inclusive */
	const uint64_t *entries; size_t nentries;   /* ascending */
	const struct gb_insn *insns; size_t ninsns; /* ascending, from start */
	const struct gb_patch_map *maps; size_t nmaps;
	uint64_t cache_lo, cache_hi;          /* the cache's code region */
	const uint64_t *codeptrs; size_t ncodeptrs; /* code addresses of the range
						     * (sym/codeptrs.h), any order; may be 0 */
	bool need_native;                     /* every patch needs a native copy
					       * (the entry blocks' check: jit.h
					       * gb_jit_opts.owner_check) */
	/* The bytes [pre_lo, start) before the range, pre_lo an instruction
	 * boundary (the end of the function before it: its symbol, its
	 * FDE), where nops before the range's start may hold its
	 * trampoline; npre 0: none known. */
	uint64_t pre_lo;
	const uint8_t *pre; size_t npre;
};

struct gb_patch {
	uint64_t addr;                        /* the entry */
	uint8_t why;                          /* enum gb_patch_why */
	uint8_t why_other;                    /* the other form's reason: for a 2-byte
					       * patch, why not the 5-byte jump; for a
					       * refused entry, why not the 2-byte one
					       * (GB_PATCH_OK: not tried) */
	uint8_t len;                          /* bytes written at addr: GB_PATCH_LEN or
					       * GB_PATCH_SHORT_LEN (then tramp) */
	uint8_t ninsns;                       /* instructions under the len bytes */
	uint64_t insn[GB_PATCH_LEN];          /* ... their addresses (insn[0] == addr) */
	uint8_t orig[GB_PATCH_LEN];           /* the bytes to restore */
	uint8_t bytes[GB_PATCH_LEN];          /* the bytes to write (gb_patch_set_target) */
	uint64_t tramp;                       /* (len 2) its trampoline's place, else 0 */
	uint8_t tramp_orig[GB_PATCH_LEN];     /* ... the nops it replaces */
	uint8_t tramp_bytes[GB_PATCH_LEN];    /* ... its jmp rel32 (gb_patch_set_target) */
};

struct gb_patch_plan { struct gb_patch *v; size_t n; };

/* 0, or -ENOMEM. */
int gb_patch_plan(const struct gb_patch_in *in, struct gb_patch_plan *out);
void gb_patch_plan_free(struct gb_patch_plan *pl);
/* The jmp rel32 to the entry block at target (for a 2-byte patch: the
 * trampoline's, and the jmp rel8 to it): 0, or -ERANGE. */
int gb_patch_set_target(struct gb_patch *p, uint64_t target);
/* Is addr strictly inside a patch's bytes, or a trampoline's (a thread, a
 * signal frame or a system call to restart standing there when the patch is
 * written)?  The patch, with *boundary the original instruction holding addr
 * (where the thread continues: its entry block, gb_jit__entry; for a
 * trampoline's nops, the entry they fall into), or NULL. */
const struct gb_patch *gb_patch_inside(const struct gb_patch_plan *pl, uint64_t addr,
				       uint64_t *boundary);
/* Put the original bytes back into buf, a copy of [addr, addr+n) of the
 * patched process (for decoding and re-checking code while patched). */
void gb_patch_unpatched(const struct gb_patch_plan *pl, uint64_t addr, uint8_t *buf, size_t n);
const char *gb_patch_why_str(int why);

#endif
