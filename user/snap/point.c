/* Getting a tracee to an exact point before a snapshot: single-step N
 * instructions (--after N), and picking up threads created on the way. */
#include "snap/point.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>

#include "common/sigflag.h"
#include "common/waitstatus.h"
#include "ptrace/mem.h"
#include "ptrace/procfs.h"
#include "ptrace/runto.h"
#include "ptrace/regs.h"
#include "ptrace/step.h"
#include "ptrace/wait.h"

/* A newly auto-attached thread: wait for its first stop. */
int gb_snap_collect_threads(struct gb_tracee *t)
{
	pid_t *tids;
	size_t n;
	int r = gb_proc_tasks(t->pid, &tids, &n);
	for (size_t i = 0; i < n; i++)
		if (!gb_tracee_thread(t, tids[i]))
			gb_tracee_adopt(t, tids[i]);
	free(tids);
	return r;
}

void gb_snap_rng_init(struct gb_snap_rng *r)
{
	r->x = 0x67656270662d736eull; /* "gebpf-sn" */
}

void gb_snap_rng_fill(struct gb_snap_rng *r, uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		r->x ^= r->x << 13;
		r->x ^= r->x >> 7;
		r->x ^= r->x << 17;
		buf[i] = (uint8_t)(r->x >> 24);
	}
}

/* At a stop after a syscall instruction: if it was a successful
 * getrandom(2), replace the bytes it returned. */
static void fix_getrandom(pid_t tid, struct gb_snap_rng *rng)
{
	struct user_regs_struct r;
	if (!rng || gb_regs_get(tid, &r) || r.orig_rax != SYS_getrandom || (int64_t)r.rax <= 0 ||
	    r.rax > (1u << 20))
		return;
	uint8_t *b = malloc(r.rax);
	if (!b)
		return;
	gb_snap_rng_fill(rng, b, r.rax);
	gb_mem_write(tid, r.rdi, b, r.rax);
	free(b);
}

static void getrandom_hook(void *ctx, pid_t tid)
{
	fix_getrandom(tid, ctx); /* entry stops have rax = -ENOSYS: ignored */
}

int gb_snap_run_to_det(struct gb_tracee *t, pid_t tid, uint64_t addr, struct gb_snap_rng *rng)
{
	return gb_run_to_hooked(t, tid, addr, getrandom_hook, rng);
}

/* A clone on the way: the new thread joins the tracee (stopped). */
static void adopt_clone(void *ctx, const struct gb_stop *st)
{
	if (st->event == PTRACE_EVENT_CLONE)
		gb_tracee_adopt(ctx, (pid_t)st->msg);
}

int gb_snap_step_det(struct gb_tracee *t, pid_t tid, uint64_t n, uint64_t *done,
		     struct gb_snap_rng *rng)
{
	struct gb_thread *th = gb_tracee_thread(t, tid);
	*done = 0;
	if (!th || !th->stopped)
		return -ESRCH;
	int sig = th->pending_sig;
	th->pending_sig = 0;
	while (*done < n) {
		if (gb_sigflag_stop()) {
			th->pending_sig = sig;
			return -EINTR;
		}
		struct gb_stop st;
		int w = gb_step(tid, sig, NULL, adopt_clone, t, &st);
		bool injected = sig != 0;
		sig = 0;
		if (w)
			return w;
		switch (st.kind) {
		case GB_STOP_EXITED:
		case GB_STOP_KILLED:
			th->exited = true;
			t->exited = true;
			t->exit_status = gb_wait_status(st.kind == GB_STOP_EXITED, st.code, st.sig);
			return -ESRCH;
		case GB_STOP_STEP:
			/* A step that only entered a signal handler ran no
			 * instruction of the program (an ignored signal was
			 * dropped and the instruction ran). */
			if (!injected || gb_step_ran(&st))
				(*done)++;
			fix_getrandom(tid, rng);
			break;
		case GB_STOP_SIGNAL:
			sig = st.sig; /* deliver it on the next step */
			break;
		default:
			break;
		}
	}
	th->pending_sig = sig;
	return 0;
}

int gb_snap_fix_random(pid_t pid, struct gb_snap_rng *rng)
{
	uint8_t bytes[16];
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/auxv", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -ESRCH;
	uint64_t av[2], at = 0;
	while (fread(av, sizeof(av), 1, f) == 1 && av[0] != 0)
		if (av[0] == 25 /* AT_RANDOM */)
			at = av[1];
	fclose(f);
	if (!at)
		return -ENOENT;
	gb_snap_rng_fill(rng, bytes, sizeof(bytes));
	return gb_mem_write(pid, at, bytes, 16) == 16 ? 0 : -EFAULT;
}
