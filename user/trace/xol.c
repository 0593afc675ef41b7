/* The kernel's uprobe page mapped first: see xol.h. */
#include "trace/xol.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "decode/decode.h"
#include "decode/flow.h"
#include "probe/probetrap.h"
#include "ptrace/maps.h"
#include "ptrace/mem.h"
#include "ptrace/regs.h"
#include "ptrace/wait.h"

/* An instruction that only changes general registers and flags, and that
 * uprobes run out of line (not one they emulate: nop, push, branches). */
static bool harmless(const struct gb_insn *in)
{
	if (in->flags & (GB_INSN_MEM | GB_INSN_BRANCH | GB_INSN_SYSCALL | GB_INSN_CPUID |
			 GB_INSN_PUSHF | GB_INSN_REP | GB_INSN_NEEDS_VEC))
		return false;
	switch (in->zi.mnemonic) {
	case ZYDIS_MNEMONIC_MOV: case ZYDIS_MNEMONIC_XOR: case ZYDIS_MNEMONIC_ADD:
	case ZYDIS_MNEMONIC_SUB: case ZYDIS_MNEMONIC_AND: case ZYDIS_MNEMONIC_OR:
	case ZYDIS_MNEMONIC_CMP: case ZYDIS_MNEMONIC_TEST: case ZYDIS_MNEMONIC_LEA:
		break;
	default:
		return false;
	}
	for (int k = 0; k < in->zi.operand_count; k++)
		if (in->ops[k].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    (in->ops[k].reg.value == ZYDIS_REGISTER_RSP || in->ops[k].reg.value == ZYDIS_REGISTER_RIP))
			return false;
	return true;
}

struct gb_xol {
	struct gb_probetrap *pt;
	uint64_t addr;     /* the probed instruction */
	bool once;         /* ... runs once when the thread goes on (straight, no_way_back) */
	pid_t tgid;
	double t0;
};

static void said(pid_t tgid, double t0, const char *how)
{
	gb_info("trace: pid %d: the kernel's uprobe page mapped first (the same layout under every "
		"trap) in %.1f ms%s", (int)tgid, (gb_mono_s() - t0) * 1e3, how);
}

static void *free_main(void *arg)
{
	struct gb_xol *x = arg;
	/* (its hit: the thread ran the instruction, out of line; 10 s without
	 * one, the thread is held elsewhere: removed anyway) */
	for (int ms = 0; ms < 10000 && !gb_probetrap__disarmed_hits(x->pt); ms++)
		usleep(1000);
	gb_probetrap__free(x->pt);
	free(x);
	return NULL;
}

uint64_t gb_xol_addr(const struct gb_xol *x) { return x ? x->addr : 0; }

void gb_xol_release(struct gb_xol *x, bool after_hit)
{
	if (!x)
		return;
	pid_t tgid = x->tgid;
	double t0 = x->t0;
	if (after_hit && x->once) {
		pthread_attr_t at;
		pthread_t th;
		sigset_t all, old;
		gb_probetrap__disarm(x->pt);
		sigfillset(&all);
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		pthread_sigmask(SIG_SETMASK, &all, &old); /* (it takes no signal of gebpf's) */
		int e = pthread_create(&th, &at, free_main, x);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&at);
		if (!e) { /* (x is the thread's now) */
			said(tgid, t0, ", its uprobe removed once the program ran past it");
			return;
		}
	}
	gb_probetrap__free(x->pt);
	free(x);
	said(tgid, t0, "");
}

int gb_xol_reserve(pid_t tgid, pid_t tid)
{
	struct gb_xol *x = NULL;
	int r = gb_xol_hold(tgid, tid, &x);
	gb_xol_release(x, false);
	return r;
}

/* An instruction the thread falls through: no branch, or a direct call
 * (which returns once). */
static bool straight(const struct gb_insn *in)
{
	return !(in->flags & GB_INSN_BRANCH) ||
	       (in->zi.mnemonic == ZYDIS_MNEMONIC_CALL &&
		in->ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE);
}

/* No direct branch of code[0..n) at rip (the entry point's code, up to
 * where it stops decoding) leads back into [rip, addr]: with the code from
 * rip to addr straight, the instruction at addr runs once. */
static bool no_way_back(uint64_t rip, const uint8_t *code, size_t n, uint64_t addr)
{
	struct gb_flow f;
	for (size_t at = 0; at < n; at += f.len) {
		if (gb_flow_decode(rip + at, code + at, n - at, &f))
			break;
		if (f.direct && f.target >= rip && f.target <= addr)
			return false;
	}
	return true;
}

int gb_xol_hold(pid_t tgid, pid_t tid, struct gb_xol **held)
{
	struct user_regs_struct regs, saved;
	struct gb_maps m;
	int r = gb_regs_get(tid, &saved);
	if (r || (r = gb_maps_read(tgid, &m)))
		return r ? r : -ESRCH;
	const struct gb_map *mp = gb_maps_find(&m, saved.rip);
	char path[sizeof(mp->path)];
	uint64_t addr = 0, off = 0;
	ssize_t n = 0;
	bool once = false;
	if (mp && mp->path[0] == '/' && (mp->prot & PROT_EXEC)) {
		/* The first harmless instruction after the current one. */
		uint8_t code[512];
		n = gb_mem_read(tid, saved.rip, code, sizeof(code));
		struct gb_insn in;
		bool flat = true; /* (the code before it falls through: straight) */
		for (ssize_t at = 0; n > 0 && at < n - GB_INSN_MAX_LEN && !addr; at += in.len) {
			if (gb_decode(saved.rip + (uint64_t)at, code + at, (size_t)(n - at), &in))
				break;
			if (harmless(&in))
				addr = saved.rip + (uint64_t)at;
			else
				flat = flat && straight(&in);
		}
		strcpy(path, mp->path);
		off = mp->offset + (addr - mp->start);
		once = addr && flat && no_way_back(saved.rip, code, (size_t)n, addr);
	}
	gb_maps_free(&m);
	if (!addr)
		return -ENOENT;
	*held = NULL;
	double t0 = gb_mono_s();
	struct gb_probetrap *pt = gb_probetrap__new(&(struct gb_probetrap_opts){
		.tgid = tgid, .quiet = true, .silent = true });
	if (!pt)
		return -ENOTSUP;
	r = gb_probetrap__add(pt, path, off);
	if (!r) {
		/* Run that one instruction out of line (its only effect, on
		 * registers, is undone): the kernel maps its page for that. */
		struct gb_stop st;
		gb_probetrap__set_stepping(pt, tid, true);
		regs = saved;
		regs.rip = addr;
		r = gb_regs_set(tid, &regs);
		if (!r && ptrace(PTRACE_SINGLESTEP, tid, 0, 0))
			r = -errno;
		bool interrupted;
		if (!r)
			r = gb_wait_resumed(tid, &st, &interrupted);
		if (!r && st.kind != GB_STOP_STEP && st.kind != GB_STOP_SIGNAL)
			r = -ESRCH;
		gb_regs_set(tid, &saved);
	}
	struct gb_xol *x = r ? NULL : calloc(1, sizeof(*x));
	if (!x) {
		gb_probetrap__free(pt);
		return r ? r : -ENOMEM;
	}
	*x = (struct gb_xol){ .pt = pt, .addr = addr, .once = once, .tgid = tgid,
			      .t0 = t0 };
	*held = x;
	return 0;
}
