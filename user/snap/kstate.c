/* The kernel state resume needs: see kstate.h. */
#include "snap/kstate.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <unistd.h>

#include "common/log.h"
#include "ptrace/mem.h"
#include "ptrace/procfs.h"
#include "ptrace/regs.h"
#include "ptrace/tracee.h"
#include "ptrace/clonestub.h"
#include "snap/proc.h"

#ifndef PTRACE_GET_RSEQ_CONFIGURATION
#define PTRACE_GET_RSEQ_CONFIGURATION 0x420f
#endif
#ifndef PTRACE_PEEKSIGINFO
#define PTRACE_PEEKSIGINFO 0x4209
#endif
#ifndef PTRACE_PEEKSIGINFO_SHARED
#define PTRACE_PEEKSIGINFO_SHARED 1
#endif
#ifndef PR_GET_TID_ADDRESS
#define PR_GET_TID_ADDRESS 40
#endif

struct rseq_conf {                 /* struct ptrace_rseq_configuration */
	uint64_t rseq_abi_pointer;
	uint32_t rseq_abi_size, signature, flags, pad;
};

/* Where the injected calls put their results: SCR bytes of the thread's
 * stack below its red zone, saved before and written back after. */
#define SCR 256
#define SCR_TID 0          /* int * (PR_GET_TID_ADDRESS) */
#define SCR_SS 16          /* stack_t, 24 bytes */
#define SCR_SA 64          /* struct sigaction (kernel), 32 bytes */
#define SCR_IT 96          /* struct itimerval, 32 bytes */

struct scratch {
	pid_t tid;
	uint64_t addr;
	uint8_t saved[SCR];
};

static int scratch_open(struct scratch *sc, pid_t tid)
{
	struct user_regs_struct r;
	int e = gb_regs_get(tid, &r);
	if (e)
		return e;
	sc->tid = tid;
	sc->addr = (r.rsp - 128 - SCR) & ~63ull;
	return gb_mem_read(tid, sc->addr, sc->saved, SCR) == SCR ? 0 : -EFAULT;
}

static void scratch_close(const struct scratch *sc)
{
	if (gb_mem_write(sc->tid, sc->addr, sc->saved, SCR) != SCR)
		gb_warn("thread %d: could not put back %d bytes below its stack pointer",
			sc->tid, SCR);
}

static int scratch_get(const struct scratch *sc, size_t off, void *buf, size_t len)
{
	return gb_mem_read(sc->tid, sc->addr + off, buf, len) == (ssize_t)len ? 0 : -EFAULT;
}

/* Call nr in thread th through the self-restoring stub (clonestub.h):
 * false when the stub could not be run; then nothing more is injected into
 * the thread (it may be finishing the stub on its own).  The call's own
 * result in *ret. */
static bool inject(const struct gb_snap_kctx *k, struct gb_thread *th, long nr, uint64_t a0,
		   uint64_t a1, uint64_t a2, uint64_t a3, long *ret)
{
	const uint64_t args[6] = { a0, a1, a2, a3, 0, 0 };
	pid_t child = 0;
	*ret = 0;
	return gb_snap_stub_call(k->pid, th->tid, 0, nr, args, ret, &child, &th->pending_sig) == 0;
}

void gb_snap__kstate_begin(struct gb_snap_kctx *k, pid_t pid)
{
	struct gb_proc_status st;
	k->pid = pid;
	k->inject = false;
	if (gb_proc_status(pid, pid, &st))
		return;
	if (st.seccomp) {
		gb_info("snap: pid %d: runs under seccomp: its signal handlers, interval timers, "
			"clear_child_tid and alternate signal stacks are not captured (nothing is "
			"injected into it)", pid);
		return;
	}
	k->inject = true;
}

/* The signals queued for thread tid (shared: for its process), as CRIU's
 * dump reads them.  false when the kernel would not say. */
static bool peek_pending(pid_t tid, bool shared, struct gb_snap_pending *p)
{
	struct { uint64_t off; uint32_t flags; int32_t nr; } a = {
		0, shared ? PTRACE_PEEKSIGINFO_SHARED : 0, GB_SNAP_NPEND };
	memset(p, 0, sizeof(*p));
	long n = ptrace(PTRACE_PEEKSIGINFO, tid, &a, p->info);
	if (n < 0)
		return false;
	p->n = (uint32_t)n;
	if (n == GB_SNAP_NPEND) {
		uint8_t more[128];
		a.nr = 1;
		for (a.off = GB_SNAP_NPEND; a.off < 4096 && ptrace(PTRACE_PEEKSIGINFO, tid, &a, more) == 1;
		     a.off++)
			p->lost++;
	}
	return true;
}

static void read_name(pid_t pid, pid_t tid, struct gb_snap_tstate *ks)
{
	char path[96], buf[32];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	memcpy(ks->name, buf, strnlen(buf, sizeof(ks->name) - 1));
	ks->have |= GB_TS_NAME;
}

void gb_snap__kstate_thread(const struct gb_snap_kctx *k, struct gb_thread *th,
			    struct gb_snap_thread *t)
{
	struct gb_snap_tstate *ks = &t->ks;
	memset(ks, 0, sizeof(*ks));
	read_name(k->pid, th->tid, ks);
	uint64_t head = 0;
	size_t len = 0;
	if (syscall(SYS_get_robust_list, th->tid, &head, &len) == 0) {
		ks->robust_head = head;
		ks->robust_len = len;
		ks->have |= GB_TS_ROBUST;
	}
	if (peek_pending(th->tid, false, &ks->pending))
		ks->have |= GB_TS_PENDING;
	struct rseq_conf rc;
	memset(&rc, 0, sizeof(rc));
	if (ptrace(PTRACE_GET_RSEQ_CONFIGURATION, th->tid, sizeof(rc), &rc) > 0) {
		ks->rseq_addr = rc.rseq_abi_pointer;
		ks->rseq_len = rc.rseq_abi_size;
		ks->rseq_sig = rc.signature;
		ks->have |= GB_TS_RSEQ;
	}
	struct scratch sc;
	long ret;
	if (!k->inject || scratch_open(&sc, th->tid))
		return;
	uint64_t tidp = 0;
	if (!inject(k, th, SYS_prctl, PR_GET_TID_ADDRESS, sc.addr + SCR_TID, 0, 0, &ret))
		goto out;
	if (ret == 0 && !scratch_get(&sc, SCR_TID, &tidp, sizeof(tidp))) {
		ks->clear_tid = tidp;
		ks->have |= GB_TS_TID_ADDR;
	}
	stack_t ss;
	if (!inject(k, th, SYS_sigaltstack, 0, sc.addr + SCR_SS, 0, 0, &ret))
		goto out;
	if (ret == 0 && !scratch_get(&sc, SCR_SS, &ss, sizeof(ss))) {
		ks->ss_sp = (uint64_t)(uintptr_t)ss.ss_sp;
		ks->ss_size = ss.ss_size;
		ks->ss_flags = ss.ss_flags;
		ks->have |= GB_TS_ALTSTACK;
	}
out:
	scratch_close(&sc);
}

static uint32_t count_posix_timers(pid_t pid)
{
	uint8_t *b;
	size_t len;
	uint32_t n = 0;
	if (gb_proc_slurp(pid, "timers", &b, &len))
		return 0;
	for (const char *p = (const char *)b; (p = strstr(p, "ID:")); p += 3)
		n++;
	free(b);
	return n;
}

/* Child processes of every thread (a traced one included). */
static uint32_t count_children(pid_t pid)
{
	pid_t *tids = NULL;
	size_t nt = 0;
	uint32_t n = 0;
	if (gb_proc_tasks(pid, &tids, &nt))
		return 0;
	for (size_t i = 0; i < nt; i++) {
		uint8_t *b;
		size_t len;
		char name[64];
		snprintf(name, sizeof(name), "task/%d/children", tids[i]);
		if (gb_proc_slurp(pid, name, &b, &len))
			continue;
		for (char *p = (char *)b; strtol(p, &p, 10) > 0;)
			n++;
		free(b);
	}
	free(tids);
	return n;
}

/* Dispositions of the caught and ignored signals (the others are SIG_DFL)
 * and the three interval timers, asked in thread th. */
static void inject_proc(const struct gb_snap_kctx *k, struct gb_thread *th, struct gb_snapshot *s,
			uint64_t set)
{
	struct gb_snap_pstate *pk = &s->pk;
	struct scratch sc;
	long ret;
	if (!k->inject || scratch_open(&sc, th->tid))
		return;
	bool ok = true, ran = true;
	for (int sig = 1; sig <= GB_SNAP_NSIG && ok; sig++) {
		if (!(set & (1ull << (sig - 1))))
			continue;
		ran = inject(k, th, SYS_rt_sigaction, (uint64_t)sig, 0, sc.addr + SCR_SA, 8, &ret);
		ok = ran && ret == 0 &&
		     !scratch_get(&sc, SCR_SA, &pk->sigact[sig - 1], sizeof(pk->sigact[0]));
	}
	if (ok)
		pk->have |= GB_PS_SIGACTS;
	ok = ran;
	for (int w = 0; w < 3 && ok; w++) {
		ran = inject(k, th, SYS_getitimer, (uint64_t)w, sc.addr + SCR_IT, 0, 0, &ret);
		ok = ran && ret == 0 &&
		     !scratch_get(&sc, SCR_IT, &pk->itimer[w], sizeof(pk->itimer[0]));
	}
	if (ok)
		pk->have |= GB_PS_ITIMERS;
	else
		memset(pk->itimer, 0, sizeof(pk->itimer));
	scratch_close(&sc);
}

void gb_snap__kstate_proc(const struct gb_snap_kctx *k, struct gb_thread *th, struct gb_snapshot *s)
{
	struct gb_snap_pstate *pk = &s->pk;
	struct gb_proc_status st;
	uint64_t set = 0;
	if (gb_proc_status(k->pid, k->pid, &st) == 0) {
		set = st.sigcgt | st.sigign;
		if (st.umask >= 0) {
			pk->umask = (uint32_t)st.umask;
			pk->have |= GB_PS_UMASK;
		}
	}
	char path[64], link[PATH_MAX];
	snprintf(path, sizeof(path), "/proc/%d/cwd", k->pid);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n > 0) {
		link[n] = 0;
		pk->cwd = strdup(link);
		if (pk->cwd)
			pk->have |= GB_PS_CWD;
	}
	bool ok = true;
	for (int r = 0; r < GB_SNAP_NRLIMITS && ok; r++) {
		struct rlimit rl;
		ok = prlimit(k->pid, (__rlimit_resource_t)r, NULL, &rl) == 0;
		pk->rlim[r].cur = rl.rlim_cur;
		pk->rlim[r].max = rl.rlim_max;
	}
	if (ok)
		pk->have |= GB_PS_RLIMITS;
	pk->posix_timers = count_posix_timers(k->pid);
	pk->children = count_children(k->pid);
	if (peek_pending(th->tid, true, &pk->pending))
		pk->have |= GB_PS_PENDING;
	inject_proc(k, th, s, set);
}
