/* Where execution can enter an address range of an ELF file from outside
 * it: the places a probe trap must watch (docs/entries.md).
 * Read from the file alone (no process): link-time virtual addresses, each
 * with its file offset (what a uprobe takes) and its original bytes (a
 * probed process shows 0xcc there).
 *
 *   struct gb_entries en;
 *   if (gb_entries_find("/lib/x86_64-linux-gnu/libc.so.6", lo, hi, &en, "probe trap") == 0) {
 *       for (size_t i = 0; i < en.n; i++) ... en.v[i].vaddr, .offset, .why, .len, .bytes
 *       for (size_t i = 0; i < en.nwarn; i++) ... en.warn[i]
 *   }
 *   gb_entries_free(&en);
 */
#ifndef GB_SYM_ENTRIES_H
#define GB_SYM_ENTRIES_H

#include <stddef.h>
#include <stdint.h>

enum gb_entry_why {
	GB_ENTRY_START   = 1u << 0, /* the range's first address */
	GB_ENTRY_RETURN  = 1u << 1, /* after a call inside the range (also where longjmp lands) */
	GB_ENTRY_BRANCH  = 1u << 2, /* target of a direct jmp/jcc/call from outside (foo.cold) */
	GB_ENTRY_LANDING = 1u << 3, /* C++ landing pad (.gcc_except_table) */
	GB_ENTRY_SYMBOL  = 1u << 4, /* a function symbol starts here (indirect calls, handlers) */
	GB_ENTRY_FUNCTION = 1u << 5, /* an .eh_frame FDE starts here, the ELF entry point, or an
				      * .init_array/.fini_array function: a function of a
				      * stripped file entered from outside (callbacks, ld.so) */
};

struct gb_entry {
	uint64_t vaddr;            /* link-time virtual address */
	uint64_t offset;           /* file offset (uprobe) */
	uint32_t why;              /* enum gb_entry_why, or-ed */
	uint8_t len;               /* instruction length */
	uint8_t bytes[15];         /* its bytes in the file */
};

struct gb_entries {
	struct gb_entry *v;        /* sorted by vaddr, unique */
	size_t n;
	char **warn;               /* one line each, no "gebpf:" prefix */
	size_t nwarn, warn_cap;
	/* What the scan did (for -v and tests). */
	size_t range_insns;        /* instructions of the range's linear decode */
	size_t code_bytes;         /* executable bytes scanned for branches */
	size_t candidates;         /* byte patterns of a branch into the range from outside */
	size_t branches;           /* of which confirmed as decoded instructions */
	size_t pads;               /* landing pads in the module */
};

/* Entries of the inclusive link-time range [lo, hi] of the ELF file at
 * path.  0, or -errno (not ELF, the range not in the file's executable
 * code, ...) with one "gebpf: warning: WHAT: <why>" line when what is not
 * NULL: the caller falls back to another trap. */
int gb_entries_find(const char *path, uint64_t lo, uint64_t hi, struct gb_entries *out,
		    const char *what);
void gb_entries_free(struct gb_entries *en);
/* The scan of [lo, hi] of path made ahead (before the target is stopped:
 * it reads the whole module, tens of ms for libc), kept for the next
 * gb_entries_find of the same range while the file is unchanged (device,
 * inode, size, mtime); forget drops it. */
void gb_entries_prefetch(const char *path, uint64_t lo, uint64_t hi);
void gb_entries_forget(void);

/* "start|return" for why. */
const char *gb_entry_why_str(uint32_t why, char *buf, size_t len);

#endif
