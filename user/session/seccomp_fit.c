/* What the target's seccomp state lets the trace do: see session/seccomp_fit.h. */
#include "session/seccomp_fit.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "common/log.h"
#include "common/page.h"
#include "jit/jit.h"
#include "ptrace/inject.h"
#include "ptrace/seccomp.h"
#include "ptrace/tramp.h"

struct call {
	bool jit;            /* made for the code cache (else for the page trap) */
	long nr;
	const char *what;
	uint64_t args[6];
	bool at_cache;       /* made from the code cache (an exit stub), not the
				injection's syscall instruction */
};

static bool allowed(uint32_t action)
{
	action &= SECCOMP_RET_ACTION_FULL;
	return action == SECCOMP_RET_ALLOW || action == SECCOMP_RET_LOG;
}

void gb_trace_seccomp_fit(const struct gb_tracee *t, uint64_t range_start,
			  enum gb_trap_kind *trap, bool *jit)
{
	bool pages = *trap == GB_TRAP_PAGES;
	if (!*jit && !pages)
		return; /* the probe trap and the step engine make no system call */
	uint64_t near = gb_page_down(range_start), none = (uint64_t)-1;
	const struct call calls[] = {
		{ true, SYS_mmap, "mmap of the code cache", { near, GB_JIT_SIZE, PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, none, 0 } },
		{ true, SYS_mprotect, "mprotect of the code cache",
		  { near, GB_JIT_CODE_SIZE, PROT_READ | PROT_EXEC } },
		{ true, -1, "the code cache's skipped exit call", { 0 }, true },
		{ true, SYS_munmap, "munmap of the code cache", { near, GB_JIT_SIZE } },
		{ false, SYS_mprotect, "mprotect of the range's pages", { near, GB_PAGE_SIZE, PROT_READ } },
		{ false, SYS_mprotect, "mprotect of the range's pages",
		  { near, GB_PAGE_SIZE, PROT_READ | PROT_EXEC } },
		{ false, SYS_mmap, "mmap of the page trap's exit trampoline", { GB_TRAMP_ADDR,
		  GB_PAGE_SIZE, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS |
		  MAP_FIXED_NOREPLACE, none, 0 } },
		{ false, SYS_munmap, "munmap of the page trap's exit trampoline",
		  { GB_TRAMP_ADDR, GB_PAGE_SIZE } },
	};
	uint64_t insn = 0; /* the injection's syscall instruction, found once needed */
	char why[200] = "", state[64] = "";
	pid_t who = 0;   /* the thread named: the first that refuses, else the first in seccomp */
	for (size_t i = 0; i < t->nthreads && (*jit || pages); i++) {
		const struct gb_thread *th = &t->threads[i];
		struct gb_seccomp *sc;
		int mode = 0;
		if (th->exited || !th->stopped)
			continue;
		int r = gb_seccomp__read(th->tid, &mode, &sc);
		if (r == -ESRCH || (!r && !sc))
			continue; /* gone (its exit is the engine's business), or no seccomp */
		if (!why[0]) {
			who = th->tid;
			snprintf(state, sizeof(state), "%s", mode == SECCOMP_MODE_STRICT ?
				 "in strict seccomp mode" : "under a seccomp filter");
		}
		if (r) { /* a state we cannot read: it may refuse anything */
			snprintf(why, sizeof(why), "its seccomp state cannot be read (%s)", strerror(-r));
			*jit = pages = false;
			break;
		}
		if (!insn)
			insn = gb_inject_find_syscall(t->pid, NULL, NULL);
		for (size_t k = 0; k < sizeof(calls) / sizeof(calls[0]); k++) {
			const struct call *c = &calls[k];
			if (c->jit ? !*jit : !pages)
				continue;
			uint32_t a = gb_seccomp__action(sc, c->nr, c->args,
							c->at_cache ? near : insn);
			if (allowed(a))
				continue;
			char an[48];
			if (!why[0])
				snprintf(why, sizeof(why), "it would %s on the %s",
					 gb_seccomp_action_name(a, an, sizeof(an)), c->what);
			if (c->jit)
				*jit = false;
			else
				pages = false;
		}
		gb_seccomp__free(sc);
	}
	if (!who)
		return;
	if (!why[0]) {
		gb_info("pid %d: thread %d is %s that allows every system call gebpf makes it run",
			t->pid, who, state);
		return;
	}
	if (*trap == GB_TRAP_PAGES && !pages)
		*trap = GB_TRAP_NONE;
	if (*trap == GB_TRAP_PATCH && !*jit)
		*trap = GB_TRAP_PROBES; /* the patch trap is a code cache */
	gb_warn("pid %d: thread %d is %s: %s; tracing with %s and %s instead%s", t->pid, who, state,
		why, *jit ? "the translating engine" : "the step engine",
		*trap == GB_TRAP_PROBES ? "the probe trap" : *trap == GB_TRAP_PAGES ? "the page trap"
		: "no entry trap (--trap none)",
		*jit || *trap == GB_TRAP_PAGES ? "" : ", which make it run no system call");
}
