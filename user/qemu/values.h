/* values=on in the plugin built for QEMU 9.2 and later (-DGB_QEMU_VALUES,
 * gebpf-qemu10.so): what each instruction wrote, in the shape of
 * `gebpf trace --values` (docs/trace-format.md "Values", docs/qemu.md
 * "QEMU 10").
 *
 * The registers an instruction writes are gebpf's decoder's
 * (decode/written.h), decoded from the instruction's bytes when QEMU
 * translates it; their values are read from QEMU by their gdb names
 * (qemu_plugin_read_register, in callbacks registered with
 * QEMU_PLUGIN_CB_R_REGS only).  A register QEMU does not expose (ymm, zmm,
 * k, xmm16-31) is left out.  Not thread-safe where said: plugin.c holds its
 * lock. */
#ifndef GB_QEMU_VALUES_H
#define GB_QEMU_VALUES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <qemu-plugin.h>

#include "decode/plan.h"
#include "decode/written.h"

/* How the instruction after it is known to follow it: a next pc that is
 * none of these means something else ran in between (a signal: the
 * instruction raised it, or one was delivered after it), and its written
 * registers are not known. */
enum gb_qnext {
	GB_QNEXT_FALL,      /* pc + len */
	GB_QNEXT_REP,       /* pc (another iteration) or pc + len */
	GB_QNEXT_DIRECT,    /* pc + len or target (a relative branch or call) */
	GB_QNEXT_MEMVAL,    /* the value its first read loaded (ret, jmp/call [mem]) */
	GB_QNEXT_ANY,       /* not known (jmp/call through a register, iret...) */
	GB_QNEXT_RAISES,    /* never: it raises a signal (int3, int n, ud2) */
};

/* An in-range instruction, as translated (kept for the plugin's life, one
 * per pc and bytes). */
struct gb_qinsn {
	uint64_t pc;
	uint64_t target;            /* GB_QNEXT_DIRECT */
	uint8_t len;
	uint8_t next;               /* enum gb_qnext */
	bool syscall;               /* syscall, sysenter, int 0x80: rcx and r11 */
	bool writes_all;            /* xrstor & co: none listed, a regs line next */
	uint8_t nw;
	struct gb_wreg w[GB_WREG_MAX];   /* the registers it writes, in file order */
	uint8_t bytes[GB_INSN_MAX_LEN];
};

/* The instruction QEMU translates at pc (bytes as qemu_plugin_insn_data
 * gives them); NULL without memory.  Thread-safe. */
const struct gb_qinsn *gb_qvals_insn(uint64_t pc, const uint8_t *bytes, size_t n);

/* Learn QEMU's register handles (a vCPU-init callback: the first call
 * does it).  Thread-safe. */
void gb_qvals_registers(void);

/* A growing text ("{...}" objects). */
struct gb_qtext {
	char *s;
	size_t len, cap;
};

/* What a vCPU's lines have said of its registers (QEMU's file, in its
 * order; values zero-padded), as gebpf's trace keeps it per thread
 * (trace/evalues.c): a regs line lists only what differs. */
#define GB_QFILE_MAX 64
struct gb_qknown {
	bool has[GB_QFILE_MAX];
	uint8_t val[GB_QFILE_MAX][16];
};

/* The registers w[0..n) an instruction wrote, as its exec line's regs
 * object at t ("{}" when none is exposed), now said in k.  One QEMU does not
 * expose is left out, and a ymm or zmm register's xmm is no longer known
 * (the next regs line says it).  In an R_REGS callback of the vCPU; buf: the
 * vCPU's read buffer.  false without memory. */
bool gb_qvals_regs(struct gb_qtext *t, GByteArray *buf, const struct gb_wreg *w, int n,
		   struct gb_qknown *k);
/* The regs line before the instruction at pc: every register of QEMU's
 * file, in gebpf's order, whose value differs from what k says (all of
 * them the first time; "{}": no line), now said in k.  rip is pc (QEMU's
 * own is its block's until the block ends). */
bool gb_qvals_file(struct gb_qtext *t, GByteArray *buf, uint64_t pc, struct gb_qknown *k);
/* r is no longer known (a syscall's rax: the next regs line says it). */
void gb_qvals_forget(struct gb_qknown *k, const struct gb_wreg *r);
void gb_qtext_free(struct gb_qtext *t);

/* QEMU's value of an access (a memory callback), little-endian into
 * val[16]; false when QEMU gives none. */
bool gb_qvals_mem(qemu_plugin_meminfo_t info, uint32_t size, uint8_t val[16]);

#endif
