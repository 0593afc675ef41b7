/* The traced binary as gebpf diff reads it: its ELF symbols and the bytes
 * of its loadable segments, from the file (no process, no ptrace), at
 * link-time addresses.  A pc becomes "symbol+0xoff" and its instruction's
 * Intel-syntax disassembly (Zydis, through user/decode). */
#ifndef GB_TDIFF_BIN_H
#define GB_TDIFF_BIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gb_tbin;

/* NULL with one "gebpf: diff: FILE: <why>" line printed (a warning when
 * not required: the binary a recording names may have moved). */
struct gb_tbin *gb_tbin__open(const char *path, bool required);
/* "name+0xoff" (or "name") into buf; false (buf = "0x<pc>") when no
 * symbol holds pc.  bin may be NULL. */
bool gb_tbin__symbol(const struct gb_tbin *bin, uint64_t pc, char *buf, size_t len);
/* Is pc inside an STT_GNU_IFUNC symbol (an ifunc's resolver)?  bin may
 * be NULL. */
bool gb_tbin__in_ifunc(const struct gb_tbin *bin, uint64_t pc);
/* The instruction at pc ("movdqu xmm0, xmmword ptr [rsp+0x10]"); false
 * (buf = "") when the file holds no valid instruction there.  mnem gets
 * the bare mnemonic ("movdqu") when not NULL. */
bool gb_tbin__disasm(const struct gb_tbin *bin, uint64_t pc, char *buf, size_t len, char *mnem, size_t mlen);
struct gb_insn;
/* The instruction at pc decoded (decode/decode.h); false when the file
 * holds none there (or bin is NULL). */
bool gb_tbin__decode(const struct gb_tbin *bin, uint64_t pc, struct gb_insn *in);
const char *gb_tbin__path(const struct gb_tbin *bin);
void gb_tbin__free(struct gb_tbin *bin);

#endif
