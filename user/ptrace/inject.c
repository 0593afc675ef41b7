#include "ptrace/inject.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/user.h>

#include "common/page.h"
#include "ptrace/maps.h"
#include "ptrace/mem.h"
#include "ptrace/regs.h"
#include "ptrace/wait.h"

struct avoid {
	int (*fn)(void *ctx, uint64_t page);
	void *ctx;
};

static bool avoided(const struct avoid *av, uint64_t a)
{
	return av->fn && (av->fn(av->ctx, gb_page_down(a)) || av->fn(av->ctx, gb_page_down(a + 1)));
}

static uint64_t scan(pid_t pid, const struct gb_map *m, const struct avoid *av)
{
	size_t len = (size_t)(m->end - m->start);
	if (len > (64u << 20))
		len = 64u << 20;
	uint8_t *buf = malloc(len);
	if (!buf)
		return 0;
	ssize_t n = gb_mem_read(pid, m->start, buf, len);
	uint64_t found = 0;
	for (ssize_t i = 0; i + 1 < n; i++) {
		uint64_t a = m->start + (uint64_t)i;
		if (buf[i] == 0x0f && buf[i + 1] == 0x05 && !avoided(av, a)) {
			found = a;
			break;
		}
	}
	free(buf);
	return found;
}

uint64_t gb_inject_find_syscall(pid_t pid, int (*avoid)(void *ctx, uint64_t page), void *ctx)
{
	struct avoid av = { avoid, ctx };
	struct gb_maps maps;
	uint64_t found = 0;
	if (gb_maps_read(pid, &maps))
		return 0;
	for (size_t i = 0; i < maps.n && !found; i++)
		if (!strcmp(maps.v[i].path, "[vdso]"))
			found = scan(pid, &maps.v[i], &av);
	for (size_t i = 0; i < maps.n && !found; i++)
		if ((maps.v[i].prot & PROT_EXEC) && maps.v[i].path[0] == '/')
			found = scan(pid, &maps.v[i], &av);
	gb_maps_free(&maps);
	return found;
}

static bool is_fault(const struct gb_stop *st)
{
	return st->code > 0 && (st->sig == SIGSEGV || st->sig == SIGBUS || st->sig == SIGILL ||
				st->sig == SIGFPE);
}

/* Registers for syscall nr(args) at insn: saved ones with the call set. */
static struct user_regs_struct call_regs(const struct user_regs_struct *saved, uint64_t insn, long nr,
					 const uint64_t args[6])
{
	struct user_regs_struct r = *saved;
	r.rax = (unsigned long long)nr;
	r.rdi = args[0];
	r.rsi = args[1];
	r.rdx = args[2];
	r.r10 = args[3];
	r.r8 = args[4];
	r.r9 = args[5];
	r.rip = insn;
	/* No syscall-restart processing for the injected call (the thread may
	 * be stopped inside an interrupted syscall of its own). */
	r.orig_rax = (unsigned long long)-1;
	return r;
}

int gb_inject_syscall_nostep(pid_t tid, uint64_t insn, long nr, const uint64_t args[6], long *ret,
			     int *pending_sig)
{
	struct user_regs_struct saved, r, now;
	int e = gb_regs_get(tid, &saved);
	if (e)
		return e;
	r = call_regs(&saved, insn, nr, args);
	if ((e = gb_regs_set(tid, &r)))
		return e;
	int result = -EIO;
	bool entered = false;
	for (int tries = 0; tries < 16; tries++) {
		struct gb_stop st;
		bool interrupted;
		if (ptrace(PTRACE_SYSCALL, tid, 0, 0))
			return -errno;
		if ((e = gb_wait_resumed(tid, &st, &interrupted)))
			return e;
		if (st.kind == GB_STOP_EXITED || st.kind == GB_STOP_KILLED) {
			gb_wait_putback(&st);
			return -ESRCH;
		}
		if (interrupted && !(st.kind == GB_STOP_SYSCALL && st.sys_exit && entered)) {
			result = -EINTR; /* stopped for the end before it was done */
			break;
		}
		if (st.kind == GB_STOP_SYSCALL) {
			if ((e = gb_regs_get(tid, &now)))
				return e;
			bool ours = now.rip == insn + 2 && (long)now.orig_rax == nr;
			if (entered && st.sys_exit && ours) {
				*ret = (long)now.rax;
				result = 0;
				break;
			}
			if (!st.sys_exit && ours) {
				entered = true;
				continue;
			}
			/* The exit of a syscall the thread was stopped in (an exec
			 * event's): our registers again. */
			if (!entered && (e = gb_regs_set(tid, &r)))
				return e;
			continue;
		}
		if (st.kind == GB_STOP_SIGNAL && !is_fault(&st) && pending_sig && !*pending_sig)
			*pending_sig = st.sig;
	}
	e = gb_regs_set(tid, &saved);
	return e ? e : result;
}

int gb_inject_syscall(pid_t tid, uint64_t insn, long nr, const uint64_t args[6], long *ret,
		      int *pending_sig)
{
	return gb_inject_syscall_ev(tid, insn, nr, args, ret, pending_sig, NULL);
}

int gb_inject_syscall_ev(pid_t tid, uint64_t insn, long nr, const uint64_t args[6], long *ret,
			 int *pending_sig, unsigned long *event_msg)
{
	if (event_msg)
		*event_msg = 0;
	struct user_regs_struct saved, r;
	int e = gb_regs_get(tid, &saved);
	if (e)
		return e;
	r = call_regs(&saved, insn, nr, args);
	e = gb_regs_set(tid, &r);
	if (e)
		return e;
	int result = -EIO;
	for (int tries = 0; tries < 16; tries++) {
		struct gb_stop st;
		bool interrupted;
		if (ptrace(PTRACE_SINGLESTEP, tid, 0, 0))
			return -errno;
		if ((e = gb_wait_resumed(tid, &st, &interrupted)))
			return e;
		if (st.kind == GB_STOP_EXITED || st.kind == GB_STOP_KILLED) {
			gb_wait_putback(&st); /* the thread's owner learns of it */
			return -ESRCH;
		}
		if (interrupted && st.kind != GB_STOP_STEP) {
			result = -EINTR; /* stopped for the end before the call ran */
			break;
		}
		if (st.kind == GB_STOP_STEP) {
			struct user_regs_struct now;
			if ((e = gb_regs_get(tid, &now)))
				return e;
			if (now.rip == insn + 2) {
				*ret = (long)now.rax;
				result = 0;
				break;
			}
			/* The step only finished a syscall the thread was stopped
			 * in (e.g. at an exec event), whose return value replaced
			 * our rax: set our registers again. */
			if ((e = gb_regs_set(tid, &r)))
				return e;
			continue;
		}
		if (st.kind == GB_STOP_EVENT && event_msg && !*event_msg)
			*event_msg = st.msg;
		/* A fault the thread took before it stopped (e.g. at an armed
		 * page trap) is regenerated when its instruction re-runs: drop
		 * it.  Anything sent to it is kept for later delivery. */
		if (st.kind == GB_STOP_SIGNAL && !is_fault(&st) && pending_sig && !*pending_sig)
			*pending_sig = st.sig;
		/* Not executed yet (signal or interrupt stop): step again. */
	}
	e = gb_regs_set(tid, &saved);
	return e ? e : result;
}
