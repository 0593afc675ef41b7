/* Syscall trampoline on a scratch page: see ptrace/tramp.h. */
#include "ptrace/tramp.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/page.h"
#include "ptrace/inject.h"
#include "ptrace/regs.h"

#define DATA_OFF 128            /* data after the code */
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

enum { D_RAX, D_RCX, D_R11, D_RDI, D_RSI, D_RDX, D_RIP, D_N };

struct gb_tramp {
	pid_t pid;
	uint64_t page;
	int memfd;                  /* /proc/PID/mem, kept open */
	pid_t inflight;             /* thread sent through it and not yet settled */
	struct user_regs_struct saved;
	uint64_t code_end;          /* address after the jmp */
};

/* mov reg, [rip + disp32] for the six registers, then jmp [rip + disp32]. */
static size_t build_code(uint8_t *c)
{
	static const uint8_t mov[6][3] = {
		{ 0x48, 0x8b, 0x05 }, { 0x48, 0x8b, 0x0d }, { 0x4c, 0x8b, 0x1d },
		{ 0x48, 0x8b, 0x3d }, { 0x48, 0x8b, 0x35 }, { 0x48, 0x8b, 0x15 },
	};
	size_t n = 0;
	c[n++] = 0x0f;
	c[n++] = 0x05;
	for (int i = 0; i < 6; i++) {
		memcpy(c + n, mov[i], 3);
		int32_t disp = (int32_t)(DATA_OFF + 8 * i - (int)(n + 7));
		memcpy(c + n + 3, &disp, 4);
		n += 7;
	}
	c[n++] = 0xff;
	c[n++] = 0x25;
	int32_t disp = (int32_t)(DATA_OFF + 8 * D_RIP - (int)(n + 4));
	memcpy(c + n, &disp, 4);
	return n + 4;
}

struct gb_tramp *gb_tramp__new(pid_t pid, pid_t tid, uint64_t syscall_insn, int *pending_sig)
{
	uint8_t code[DATA_OFF];
	char path[64];
	long ret;
	struct gb_tramp *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->pid = pid;
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	t->memfd = open(path, O_RDWR | O_CLOEXEC);
	/* Far from where the program's own mappings go (mmap allocates top-down
	 * from below the stack, brk grows up from the executable), so the page
	 * never moves a later mmap of the program: its address-space layout
	 * stays what it is natively. */
	uint64_t args[6] = { GB_TRAMP_ADDR, GB_PAGE_SIZE, PROT_READ | PROT_EXEC,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, (uint64_t)-1, 0 };
	if (t->memfd < 0 ||
	    gb_inject_syscall(tid, syscall_insn, SYS_mmap, args, &ret, pending_sig) ||
	    (ret < 0 && ret >= -4095)) { /* -errno */
		if (t->memfd >= 0)
			close(t->memfd);
		free(t);
		return NULL;
	}
	t->page = (uint64_t)ret;
	if (t->page != GB_TRAMP_ADDR) {
		/* Not where it belongs (taken, or an old kernel ignoring the
		 * flag somewhere else): do without. */
		gb_tramp__unmap(t, tid, syscall_insn, pending_sig);
		gb_tramp__free(t);
		return NULL;
	}
	size_t n = build_code(code);
	t->code_end = t->page + n;
	if (pwrite(t->memfd, code, n, (off_t)t->page) != (ssize_t)n) {
		gb_tramp__unmap(t, tid, syscall_insn, pending_sig);
		gb_tramp__free(t);
		return NULL;
	}
	return t;
}

int gb_tramp__launch(struct gb_tramp *t, pid_t tid, const struct user_regs_struct *r, long nr,
		     uint64_t a0, uint64_t a1, uint64_t a2)
{
	uint64_t d[D_N] = { r->rax, r->rcx, r->r11, r->rdi, r->rsi, r->rdx, r->rip };
	if (pwrite(t->memfd, d, sizeof(d), (off_t)(t->page + DATA_OFF)) != (ssize_t)sizeof(d))
		return -EIO;
	struct user_regs_struct n = *r;
	n.rip = t->page;
	n.rax = (unsigned long long)nr;
	n.rdi = a0;
	n.rsi = a1;
	n.rdx = a2;
	n.orig_rax = (unsigned long long)-1;
	int e = gb_regs_set(tid, &n);
	if (e)
		return e;
	t->saved = *r;
	t->inflight = tid;
	return 0;
}

int gb_tramp__settle(struct gb_tramp *t, pid_t tid, bool *ran_syscall)
{
	struct user_regs_struct r;
	if (!t || t->inflight != tid)
		return 0;
	t->inflight = 0;
	if (gb_regs_get(tid, &r) || r.rip < t->page || r.rip >= t->code_end)
		return 0; /* done with it (or gone) */
	*ran_syscall = r.rip != t->page;
	/* What the rest of the trampoline would have done. */
	gb_regs_set(tid, &t->saved);
	return 1;
}

void gb_tramp__unmap(struct gb_tramp *t, pid_t tid, uint64_t syscall_insn, int *pending_sig)
{
	uint64_t args[6] = { t->page, GB_PAGE_SIZE, 0, 0, 0, 0 };
	long ret;
	gb_inject_syscall(tid, syscall_insn, SYS_munmap, args, &ret, pending_sig);
}

void gb_tramp__free(struct gb_tramp *t)
{
	if (!t)
		return;
	close(t->memfd);
	free(t);
}
