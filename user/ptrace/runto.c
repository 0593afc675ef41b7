#include "ptrace/runto.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/waitstatus.h"
#include "ptrace/mem.h"
#include "ptrace/regs.h"
#include "ptrace/step.h"
#include "ptrace/wait.h"

uint64_t gb_auxv_entry(pid_t pid)
{
	char path[64];
	uint64_t av[2], entry = 0;
	snprintf(path, sizeof(path), "/proc/%d/auxv", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	while (read(fd, av, sizeof(av)) == (ssize_t)sizeof(av) && av[0] != AT_NULL)
		if (av[0] == AT_ENTRY)
			entry = av[1];
	close(fd);
	return entry;
}

int gb_run_to(struct gb_tracee *t, pid_t tid, uint64_t addr)
{
	return gb_run_to_hooked(t, tid, addr, NULL, NULL);
}

int gb_run_to_hooked(struct gb_tracee *t, pid_t tid, uint64_t addr, gb_syscall_hook hook,
		     void *ctx)
{
	struct user_regs_struct r;
	uint8_t orig;
	struct gb_thread *th = gb_tracee_thread(t, tid);
	if (!th)
		return -ESRCH;
	if (gb_regs_get(tid, &r))
		return -ESRCH;
	if (r.rip == addr)
		return 0;
	if (gb_bp_plant(tid, addr, &orig))
		return -EFAULT;
	int ret = 0, sig = th->pending_sig;
	th->pending_sig = 0;
	for (;;) {
		ptrace(hook ? PTRACE_SYSCALL : PTRACE_CONT, tid, 0, sig);
		sig = 0;
		struct gb_stop st;
		int w = gb_wait(tid, 0, &st, true);
		if (w == -EINTR) {
			ptrace(PTRACE_INTERRUPT, tid, 0, 0);
			gb_wait(tid, 0, &st, false);
			if (st.kind == GB_STOP_SIGNAL)
				th->pending_sig = st.sig;
			ret = -EINTR;
			break;
		}
		if (w) {
			ret = w;
			break;
		}
		if (st.kind == GB_STOP_EXITED || st.kind == GB_STOP_KILLED) {
			th->exited = true;
			t->exited = true;
			t->exit_status = gb_wait_status(st.kind == GB_STOP_EXITED, st.code, st.sig);
			return -ESRCH;
		}
		if (gb_bp_reached(tid, &st, addr))
			break;
		if (st.kind == GB_STOP_SYSCALL && hook)
			hook(ctx, tid);
		else if (st.kind == GB_STOP_SIGNAL)
			sig = st.sig; /* the program's own signal: deliver it */
		else if (st.kind == GB_STOP_EVENT && st.event == PTRACE_EVENT_CLONE)
			gb_tracee_adopt(t, (pid_t)st.msg);
		/* other events (fork, exec ...) and interrupts: just continue */
	}
	gb_bp_remove(tid, addr, orig);
	return ret;
}
