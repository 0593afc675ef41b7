/* Decoded-instruction cache keyed by PC.
 *
 * An entry is trusted without re-reading the tracee's code while the cache's
 * epoch is unchanged since the entry was last checked.  The engine bumps the
 * epoch whenever code may have changed behind its back (a syscall, a write
 * into a page that holds cached code, native execution, exec); an entry from
 * an older epoch is re-validated by reading its bytes again (one
 * process_vm_readv) and re-decoded only when they differ.
 */
#ifndef GB_TRACE_ICACHE_H
#define GB_TRACE_ICACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "decode/decode.h"

struct gb_icache;

struct gb_icache *gb_icache__new(void);
void gb_icache__free(struct gb_icache *c);

/* The decoded instruction at pc of pid, or NULL when the bytes cannot be
 * read or decoded (*err = -errno / -EINVAL). */
const struct gb_insn *gb_icache__get(struct gb_icache *c, pid_t pid, uint64_t pc, int *err);

/* Bytes the process shows that are not its code (a probe's int3): patch
 * is called on every read of code bytes to put the originals back. */
typedef void (*gb_icache_patch_fn)(void *ctx, uint64_t addr, uint8_t *buf, size_t len);
void gb_icache__set_patch(struct gb_icache *c, gb_icache_patch_fn fn, void *ctx);
/* Put the originals back into code bytes buf read at addr (the patch). */
void gb_icache__patch(const struct gb_icache *c, uint64_t addr, uint8_t *buf, size_t len);

/* Code may have changed anywhere: re-validate entries on next use. */
void gb_icache__bump(struct gb_icache *c);
/* A write of len bytes at addr happened: bump when it touches a code page. */
void gb_icache__note_write(struct gb_icache *c, uint64_t addr, uint64_t len);
/* Changes whenever code may have changed (bump, clear, a write to code). */
uint64_t gb_icache__epoch(const struct gb_icache *c);
/* Forget everything (exec of a new image). */
void gb_icache__clear(struct gb_icache *c);

struct gb_icache_stats { uint64_t hits, validations, decodes; };
void gb_icache__stats(const struct gb_icache *c, struct gb_icache_stats *s);

#endif
