/* Getting a tracee to an exact point before a snapshot: single-step N
 * instructions (--after N), and picking up threads created on the way. */
#include "snap/point.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>

#include "ptrace/mem.h"
#include "ptrace/runto.h"
#include "ptrace/regs.h"
#include "ptrace/wait.h"

/* A newly auto-attached thread: wait for its first stop. */
int gb_snap_collect_threads(struct gb_tracee *t)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", t->pid);
	DIR *d = opendir(path);
	if (!d)
		return -ESRCH;
	struct dirent *de;
	while ((de = readdir(d))) {
		pid_t tid = atoi(de->d_name);
		if (tid > 0 && !gb_tracee_thread(t, tid))
			gb_tracee_adopt(t, tid);
	}
	closedir(d);
	return 0;
}

/* pushf (with operand-size/REX prefixes) pushes RFLAGS with TF set while we
 * step: clear it in the pushed copy, as the program would have pushed it. */
static bool is_pushf(pid_t tid, uint64_t rip)
{
	uint8_t b[4];
	if (gb_mem_read(tid, rip, b, sizeof(b)) < 1)
		return false;
	size_t i = 0;
	while (i < 3 && (b[i] == 0x66 || (b[i] & 0xf0) == 0x40))
		i++;
	return b[i] == 0x9c;
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

int gb_snap_step(struct gb_tracee *t, pid_t tid, uint64_t n, uint64_t *done)
{
	return gb_snap_step_det(t, tid, n, done, NULL);
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
		struct user_regs_struct r;
		if (gb_regs_get(tid, &r))
			return -ESRCH;
		bool pushf = !sig && is_pushf(tid, r.rip);
		bool injected = sig != 0;
		if (ptrace(PTRACE_SINGLESTEP, tid, 0, sig))
			return -errno;
		sig = 0;
		struct gb_stop st;
		int w = gb_wait(tid, 0, &st, true);
		if (w == -EINTR) {
			ptrace(PTRACE_INTERRUPT, tid, 0, 0);
			gb_wait(tid, 0, &st, false);
			if (st.kind == GB_STOP_SIGNAL)
				th->pending_sig = st.sig;
			return -EINTR;
		}
		if (w)
			return w;
		switch (st.kind) {
		case GB_STOP_EXITED:
		case GB_STOP_KILLED:
			th->exited = true;
			t->exited = true;
			t->exit_status = st.kind == GB_STOP_EXITED ? W_EXITCODE(st.code, 0) : st.sig;
			return -ESRCH;
		case GB_STOP_STEP:
			/* A step that only entered a signal handler ran no
			 * instruction of the program. */
			if (!injected)
				(*done)++;
			fix_getrandom(tid, rng);
			if (pushf) {
				uint64_t v;
				if (gb_regs_get(tid, &r) == 0 && gb_mem_read(tid, r.rsp, &v, 8) == 8) {
					v &= ~0x100ull;
					gb_mem_write(tid, r.rsp, &v, 8);
				}
			}
			break;
		case GB_STOP_SIGNAL:
			sig = st.sig; /* deliver it on the next step */
			break;
		case GB_STOP_EVENT:
			if (st.event == PTRACE_EVENT_CLONE)
				gb_tracee_adopt(t, (pid_t)st.msg);
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
