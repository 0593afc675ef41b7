#include "trace/cpu.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "decode/plan.h"
#include "decode/xsave.h"
#include "ptrace/regs.h"

void gb_cpu_from_regs(struct gb_cpu *c, const struct user_regs_struct *r)
{
	c->rax = r->rax; c->rbx = r->rbx; c->rcx = r->rcx; c->rdx = r->rdx;
	c->rsi = r->rsi; c->rdi = r->rdi; c->rbp = r->rbp; c->rsp = r->rsp;
	c->r8 = r->r8; c->r9 = r->r9; c->r10 = r->r10; c->r11 = r->r11;
	c->r12 = r->r12; c->r13 = r->r13; c->r14 = r->r14; c->r15 = r->r15;
	c->rip = r->rip; c->rflags = r->eflags;
	c->fs_base = r->fs_base; c->gs_base = r->gs_base;
	c->vec = NULL;
}

/* Offset of XSAVE component i in this machine's non-compacted layout, the
 * one PTRACE_GETREGSET(NT_X86_XSTATE) returns; 0 when not enabled. */
static unsigned comp_offset(unsigned i)
{
	uint32_t off, size;
	return gb_xsave_comp(i, &off, &size) ? off : 0;
}

int gb_vec_read(pid_t tid, struct gb_vec *vec)
{
	static __thread uint8_t *buf;
	static __thread size_t cap;
	size_t len;
	int r = gb_xstate_read(tid, &buf, &cap, &len);
	if (r)
		return r;
	memset(vec, 0, sizeof(*vec));
	uint64_t xstate_bv = len >= 520 ? *(uint64_t *)(buf + 512) : 3;
	/* Legacy area: xmm0-15 at 160. */
	for (int i = 0; i < 16; i++)
		memcpy(vec->zmm[i], buf + 160 + 16 * i, 16);
	unsigned off;
	/* Component 2: upper 128 bits of ymm0-15. */
	if ((xstate_bv & (1u << 2)) && (off = comp_offset(2)) && off + 256 <= len)
		for (int i = 0; i < 16; i++)
			memcpy(vec->zmm[i] + 16, buf + off + 16 * i, 16);
	/* Component 5: opmask k0-7. */
	if ((xstate_bv & (1u << 5)) && (off = comp_offset(5)) && off + 64 <= len)
		memcpy(vec->k, buf + off, 64);
	/* Component 6: upper 256 bits of zmm0-15. */
	if ((xstate_bv & (1u << 6)) && (off = comp_offset(6)) && off + 512 <= len)
		for (int i = 0; i < 16; i++)
			memcpy(vec->zmm[i] + 32, buf + off + 32 * i, 32);
	/* Component 7: zmm16-31. */
	if ((xstate_bv & (1u << 7)) && (off = comp_offset(7)) && off + 1024 <= len)
		for (int i = 0; i < 16; i++)
			memcpy(vec->zmm[16 + i], buf + off + 64 * i, 64);
	return 0;
}

/* The field of r that holds general register slot k (enum gb_reg). */
unsigned long long *gb_regs_field(struct user_regs_struct *r, unsigned k)
{
	static const size_t off[GB_REG_COUNT] = {
		offsetof(struct user_regs_struct, rax), offsetof(struct user_regs_struct, rbx),
		offsetof(struct user_regs_struct, rcx), offsetof(struct user_regs_struct, rdx),
		offsetof(struct user_regs_struct, rsi), offsetof(struct user_regs_struct, rdi),
		offsetof(struct user_regs_struct, rbp), offsetof(struct user_regs_struct, rsp),
		offsetof(struct user_regs_struct, r8),  offsetof(struct user_regs_struct, r9),
		offsetof(struct user_regs_struct, r10), offsetof(struct user_regs_struct, r11),
		offsetof(struct user_regs_struct, r12), offsetof(struct user_regs_struct, r13),
		offsetof(struct user_regs_struct, r14), offsetof(struct user_regs_struct, r15),
	};
	return (unsigned long long *)((char *)r + off[k]);
}
