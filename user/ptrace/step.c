/* One single-step: see step.h. */
#include "ptrace/step.h"

#include <errno.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/user.h>

#include "ptrace/mem.h"
#include "ptrace/regs.h"

#define TF 0x100ull

bool gb_step_ran(const struct gb_stop *st)
{
	return st->kind == GB_STOP_STEP && st->code != SIGTRAP;
}

int gb_bp_plant(pid_t tid, uint64_t addr, uint8_t *orig)
{
	uint8_t cc = 0xcc;
	if (gb_mem_read(tid, addr, orig, 1) != 1 || gb_mem_write(tid, addr, &cc, 1) != 1)
		return -EFAULT;
	return 0;
}

bool gb_bp_reached(pid_t tid, const struct gb_stop *st, uint64_t addr)
{
	struct user_regs_struct r;
	if (st->kind != GB_STOP_SIGNAL || st->sig != SIGTRAP || gb_regs_get(tid, &r) ||
	    r.rip != addr + 1)
		return false;
	r.rip = addr;
	gb_regs_set(tid, &r);
	return true;
}

void gb_bp_remove(pid_t tid, uint64_t addr, uint8_t orig)
{
	gb_mem_write(tid, addr, &orig, 1);
}

/* pushf / cpuid, with legacy and REX prefixes, from the code bytes. */
static int sniff(pid_t tid, struct gb_step_insn *in)
{
	struct user_regs_struct r;
	uint8_t b[8];
	if (gb_regs_get(tid, &r))
		return -ESRCH;
	*in = (struct gb_step_insn){ .rflags = r.eflags };
	ssize_t n = gb_mem_read(tid, r.rip, b, sizeof(b));
	ssize_t i = 0;
	while (i < n - 1 && (b[i] == 0x66 || b[i] == 0xf2 || b[i] == 0xf3 || (b[i] & 0xf0) == 0x40))
		i++;
	if (i < n && b[i] == 0x9c)
		in->pushf = true;
	else if (i + 1 < n && b[i] == 0x0f && b[i + 1] == 0xa2) {
		in->cpuid = true;
		in->len = (uint8_t)(i + 2);
	}
	return 0;
}

int gb_step_wait(pid_t tid, int req, gb_step_event_fn on_event, void *ctx, struct gb_stop *st)
{
	for (;;) {
		bool interrupted;
		int r = gb_wait_resumed(tid, st, &interrupted);
		if (r)
			return r;
		if (st->kind == GB_STOP_EVENT) {
			if (on_event)
				on_event(ctx, st);
			if (interrupted)
				return 0; /* stopped for the end: not resumed again */
		} else if (st->kind != GB_STOP_INTERRUPT || interrupted) {
			return 0;
		}
		if (ptrace(req, tid, 0, 0))
			return -errno;
	}
}

/* cpuid at rip, run to an int3 after it. */
static int run_over_cpuid(pid_t tid, const struct gb_step_insn *in, gb_step_event_fn on_event,
			  void *ctx, struct gb_stop *st)
{
	struct user_regs_struct r;
	uint8_t orig;
	if (gb_regs_get(tid, &r))
		return -ESRCH;
	uint64_t bp = r.rip + in->len;
	int e = gb_bp_plant(tid, bp, &orig);
	if (e)
		return e;
	e = ptrace(PTRACE_CONT, tid, 0, 0) ? -errno : gb_step_wait(tid, PTRACE_CONT, on_event, ctx, st);
	gb_bp_remove(tid, bp, orig);
	if (!e && gb_bp_reached(tid, st, bp))
		st->kind = GB_STOP_STEP;
	return e;
}

int gb_step(pid_t tid, int sig, const struct gb_step_insn *in, gb_step_event_fn on_event,
	    void *ctx, struct gb_stop *st)
{
	struct gb_step_insn sniffed;
	if (!in) {
		int e = sniff(tid, &sniffed);
		if (e)
			return e;
		in = &sniffed;
	}
	if (!sig && in->cpuid)
		return run_over_cpuid(tid, in, on_event, ctx, st);
	if (ptrace(PTRACE_SINGLESTEP, tid, 0, sig))
		return -errno;
	int e = gb_step_wait(tid, PTRACE_SINGLESTEP, on_event, ctx, st);
	if (e || !in->pushf || !gb_step_ran(st) || (in->rflags & TF))
		return e;
	/* The pushed copy of RFLAGS has our TF: the program's had none. */
	struct user_regs_struct r;
	uint16_t w;
	if (gb_regs_get(tid, &r) == 0 && gb_mem_read(tid, r.rsp, &w, 2) == 2 && (w & TF)) {
		w &= (uint16_t)~TF;
		gb_mem_write(tid, r.rsp, &w, 2);
	}
	return 0;
}

int gb_step_deliver(pid_t tid, int sig, struct gb_stop *st)
{
	bool interrupted;
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) || ptrace(PTRACE_CONT, tid, 0, sig))
		return -errno;
	return gb_wait_resumed(tid, st, &interrupted);
}

int gb_step_untrap(pid_t tid, struct gb_stop *st)
{
	return gb_step_deliver(tid, 0, st);
}
