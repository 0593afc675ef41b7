/* The self-restoring syscall stub (the copy's clone, the kernel state's
 * calls): see clonestub.h. */
#include "ptrace/clonestub.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <unistd.h>

#include "common/page.h"
#include "ptrace/inject.h"
#include "ptrace/maps.h"
#include "ptrace/regs.h"
#include "ptrace/wait.h"

#define DATA_OFF 208                  /* the code is shorter */
#define STUB_LEN (DATA_OFF + 8 * D_N)

/* The data after the code: every register the stub changes, as the thread
 * must get it back, the all-ones mask, and the call to make (number, six
 * arguments). */
enum { D_ALL, D_MASK, D_FLAGS, D_RAX, D_RCX, D_R11, D_RDI, D_RSI, D_RDX, D_R10, D_R8, D_R9, D_RSP,
       D_RIP, D_NR, D_A0, D_A1, D_A2, D_A3, D_A4, D_A5, D_N };

struct code {
	uint8_t b[STUB_LEN];
	size_t n;
	size_t mask_end, call_end, restore_end; /* offsets after each syscall */
};

static void put(struct code *c, const void *bytes, size_t n)
{
	memcpy(c->b + c->n, bytes, n);
	c->n += n;
}

static void put32(struct code *c, uint32_t v) { put(c, &v, 4); }

/* The disp32 of a rip-relative operand followed by tail bytes of immediate. */
static void put_rip_tail(struct code *c, int d, int tail)
{
	put32(c, (uint32_t)(DATA_OFF + 8 * d - (int)(c->n + 4) - tail));
}

static void put_rip(struct code *c, int d) { put_rip_tail(c, d, 0); }

static void build(struct code *c)
{
	/* mov REG, [rip + D]: REX, opcode, modrm for each restored register. */
	static const struct { uint8_t rex, modrm; int d; } back[] = {
		{ 0x48, 0x05, D_RAX }, { 0x48, 0x0d, D_RCX }, { 0x4c, 0x1d, D_R11 },
		{ 0x48, 0x3d, D_RDI }, { 0x48, 0x35, D_RSI }, { 0x48, 0x15, D_RDX },
		{ 0x4c, 0x15, D_R10 }, { 0x4c, 0x05, D_R8 }, { 0x4c, 0x0d, D_R9 },
		{ 0x48, 0x25, D_RSP },
	};
	/* mov REG, [rip + D]: the call's number and arguments. */
	static const struct { uint8_t rex, modrm; int d; } call[] = {
		{ 0x48, 0x3d, D_A0 }, { 0x48, 0x35, D_A1 }, { 0x48, 0x15, D_A2 },
		{ 0x4c, 0x15, D_A3 }, { 0x4c, 0x05, D_A4 }, { 0x4c, 0x0d, D_A5 },
	};
	memset(c, 0, sizeof(*c));
	/* rt_sigprocmask(SIG_SETMASK, &all, NULL, 8): the registers are set
	 * by gebpf. */
	put(c, "\x0f\x05", 2);
	c->mask_end = c->n;
	put(c, "\x8b\x05", 2), put_rip(c, D_NR);        /* mov eax, [nr] */
	for (size_t i = 0; i < sizeof(call) / sizeof(call[0]); i++) {
		uint8_t op[3] = { call[i].rex, 0x8b, call[i].modrm };
		put(c, op, 3);
		put_rip(c, call[i].d);
	}
	put(c, "\x0f\x05", 2);
	c->call_end = c->n;
	/* The clone's child (0 from a clone) exits; every other return goes
	 * back. */
	put(c, "\x48\x85\xc0", 3);                       /* test rax, rax */
	size_t jnz = c->n;
	put(c, "\x75\x00", 2);                           /* jnz parent */
	put(c, "\x83\x3d", 2), put_rip_tail(c, D_NR, 1);
	put(c, (uint8_t[]){ SYS_clone }, 1);              /* cmp dword [nr], SYS_clone */
	size_t jz = c->n;
	put(c, "\x74\x00", 2);                           /* jz child */
	c->b[jnz + 1] = (uint8_t)(c->n - (jnz + 2));
	put(c, "\xb8", 1), put32(c, SYS_rt_sigprocmask);
	put(c, "\xbf", 1), put32(c, SIG_SETMASK);
	put(c, "\x48\x8d\x35", 3), put_rip(c, D_MASK);   /* lea rsi, [mask] */
	put(c, "\x31\xd2\x41\xba\x08\x00\x00\x00", 8);   /* no old set; size 8 */
	put(c, "\x0f\x05", 2);
	c->restore_end = c->n;
	put(c, "\x48\x8d\x25", 3), put_rip(c, D_FLAGS);  /* lea rsp, [flags] */
	put(c, "\x9d", 1);                               /* popfq */
	for (size_t i = 0; i < sizeof(back) / sizeof(back[0]); i++) {
		uint8_t op[3] = { back[i].rex, 0x8b, back[i].modrm };
		put(c, op, 3);
		put_rip(c, back[i].d);
	}
	put(c, "\xff\x25", 2), put_rip(c, D_RIP);        /* jmp [rip] */
	c->b[jz + 1] = (uint8_t)(c->n - (jz + 2));
	/* child: exit_group(0), for ever. */
	put(c, "\xb8", 1), put32(c, SYS_exit_group);
	put(c, "\x31\xff\x0f\x05\xeb\xf5", 6);           /* xor edi, edi; syscall; jmp child */
}

/* The registers the thread gets back at the stub's end when it runs it on
 * its own: where it was (prepare: never inside a syscall to restart). */
static void fill_data(uint64_t *d, const struct user_regs_struct *r, uint64_t mask, long nr,
		      const uint64_t args[6])
{
	d[D_ALL] = ~0ull;
	d[D_MASK] = mask;
	d[D_FLAGS] = r->eflags;
	d[D_RAX] = r->rax;
	d[D_RCX] = r->rcx;
	d[D_R11] = r->r11;
	d[D_RDI] = r->rdi;
	d[D_RSI] = r->rsi;
	d[D_RDX] = r->rdx;
	d[D_R10] = r->r10;
	d[D_R8] = r->r8;
	d[D_R9] = r->r9;
	d[D_RSP] = r->rsp;
	d[D_RIP] = r->rip;
	d[D_NR] = (uint64_t)nr;
	for (int i = 0; i < 6; i++)
		d[D_A0 + i] = args[i];
}

static bool is_fault(const struct gb_stop *st)
{
	return st->code > 0 && (st->sig == SIGSEGV || st->sig == SIGBUS || st->sig == SIGILL ||
				st->sig == SIGFPE);
}

/* The signal to resume a stop with where the thread is on the stub's
 * registers past its first syscall (all signals blocked: only one already
 * on its way, which is kept for its later delivery; a second one is
 * delivered now, where it is harmless: the stub runs on after the handler). */
static int keep_signal(const struct gb_stop *st, int *pending_sig)
{
	if (st->kind != GB_STOP_SIGNAL)
		return 0;
	if (pending_sig && !*pending_sig) {
		*pending_sig = st->sig;
		return 0;
	}
	return st->sig;
}

/* From a stop to a PTRACE_INTERRUPT stop, where the thread's registers can
 * be put back exactly, delivering sig first (from a signal-delivery-stop:
 * the thread then stops at its handler's first instruction).  The pending
 * trap stop comes before the thread returns to user mode, and before any
 * other signal is taken. */
static int to_interrupt_stop(pid_t tid, int *pending_sig, int sig)
{
	struct gb_stop st;
	int e;
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0))
		return -errno;
	for (int tries = 0; tries < 16; tries++) {
		if (ptrace(PTRACE_CONT, tid, 0, sig))
			return -errno;
		if ((e = gb_wait(tid, 0, &st, false)))
			return e;
		if (st.kind == GB_STOP_EXITED || st.kind == GB_STOP_KILLED) {
			gb_wait_putback(&st);
			return -ESRCH;
		}
		if (gb_stop_is_interrupt(&st))
			return 0;
		sig = keep_signal(&st, pending_sig);
	}
	return -EIO;
}

/* At the entry of the stub's first syscall: the thread's signal mask as the
 * stub must put it back.  Only now is it the thread's own: in a stop inside
 * sigsuspend, ppoll, pselect or epoll_pwait the mask read at the stop was
 * the syscall's temporary one, which the kernel replaced with the saved one
 * when the thread left that stop.  (The stub's data holds the mask of the
 * stop until then.) */
static int save_mask(pid_t tid, int memfd, uint64_t page)
{
	uint64_t mask;
	if (ptrace(PTRACE_GETSIGMASK, tid, sizeof(mask), &mask))
		return -errno;
	off_t at = (off_t)(page + DATA_OFF + 8 * D_MASK);
	return pwrite(memfd, &mask, sizeof(mask), at) == (ssize_t)sizeof(mask) ? 0 : -EIO;
}

/* Thread tid as the stub must start from: at a stop in user mode, its
 * registers its own, no signal taken from it.  A signal it is stopped to
 * take (th->pending_sig from the freeze) is delivered now, as the kernel
 * would on resuming that stop: its handler's frame is built and the thread
 * stopped at the handler's first instruction.  A thread stopped in a
 * syscall the kernel restarts is let do the restart itself: a signal that
 * comes on the way is delivered on its own registers (a sigsuspend returns
 * EINTR after the handler, SA_RESTART is obeyed), else the restarted
 * syscall's entry is turned into a stop on its syscall instruction with
 * its number in rax (the mask the kernel restores is then the thread's
 * own).  Every moment of this leaves the thread correct without gebpf: at
 * worst it takes the signal or makes the syscall by itself.  *r: the
 * registers to start the stub from; *fin: those to put back at its end
 * (the original ones, a syscall to restart included, unless a signal was
 * delivered: then the handler's). */
static int prepare(pid_t tid, struct user_regs_struct *r, struct user_regs_struct *fin,
		   int *pending_sig)
{
	siginfo_t si;
	struct gb_stop st;
	int e;
	if (*pending_sig && ptrace(PTRACE_GETSIGINFO, tid, 0, &si) == 0 &&
	    si.si_signo == *pending_sig) {
		int sig = *pending_sig;
		*pending_sig = 0;
		if ((e = to_interrupt_stop(tid, pending_sig, sig)) || (e = gb_regs_get(tid, r)))
			return e;
		*fin = *r;
		return 0;
	}
	if (!gb_regs_restarting_syscall(r))
		return 0;
	for (int tries = 0; tries < 16; tries++) {
		if (ptrace(PTRACE_SYSCALL, tid, 0, 0))
			return -errno;
		if ((e = gb_wait(tid, 0, &st, false)))
			return e;
		if (st.kind == GB_STOP_EXITED || st.kind == GB_STOP_KILLED) {
			gb_wait_putback(&st);
			return -ESRCH;
		}
		if (st.kind == GB_STOP_SIGNAL && !is_fault(&st)) {
			if ((e = to_interrupt_stop(tid, pending_sig, st.sig)) || (e = gb_regs_get(tid, r)))
				return e;
			*fin = *r;
			return 0;
		}
		if (st.kind != GB_STOP_SYSCALL || st.sys_exit)
			continue;
		struct user_regs_struct now;
		if ((e = gb_regs_get(tid, &now)))
			return e;
		if (now.rip != r->rip)
			return -EPROTO; /* cannot be: it entered another syscall */
		now.rax = now.orig_rax;
		now.rip -= 2;
		now.orig_rax = (unsigned long long)-1; /* skipped, made again from user mode */
		if ((e = gb_regs_set(tid, &now)) || (e = to_interrupt_stop(tid, pending_sig, 0)))
			return e;
		return gb_regs_get(tid, r);
	}
	return -EIO;
}

/* Run the stub on the thread until it is back in its own code's registers;
 * *ret and *child as for gb_snap_stub_call. */
static int run(pid_t tid, int memfd, uint64_t page, const struct code *c,
	       const struct user_regs_struct *r0, const struct user_regs_struct *fin, long *ret,
	       pid_t *child, int *pending_sig)
{
	struct user_regs_struct n = *r0, now;
	struct gb_stop st;
	int sig = 0, e;
	bool entered = false;
	n.rip = page;
	n.rax = SYS_rt_sigprocmask;
	n.rdi = SIG_SETMASK;
	n.rsi = page + DATA_OFF + 8 * D_ALL;
	n.rdx = 0;
	n.r10 = 8;
	n.orig_rax = (unsigned long long)-1; /* no restart of the syscall it was in */
	if ((e = gb_regs_set(tid, &n)))
		return e;
	/* From here on the thread can be left alone at any moment. */
	for (int tries = 0; tries < 64; tries++) {
		if (ptrace(PTRACE_SYSCALL, tid, 0, sig))
			return -errno;
		if ((e = gb_wait(tid, 0, &st, false)))
			return e;
		sig = 0;
		switch (st.kind) {
		case GB_STOP_EXITED:
		case GB_STOP_KILLED:
			gb_wait_putback(&st);
			return -ESRCH;
		case GB_STOP_EVENT:
			if (st.event == PTRACE_EVENT_CLONE)
				*child = (pid_t)st.msg;
			break;
		case GB_STOP_SIGNAL:
			/* A fault the thread took before it stopped comes back
			 * when its instruction re-runs: drop it (one in the stub
			 * would come back each time, until the tries run out). */
			if (is_fault(&st))
				break;
			if (!entered) {
				/* A signal as the thread leaves its stop, before
				 * the stub blocks them all: delivered to it as it
				 * was (never kept: a signal kept where the thread
				 * then stops for PTRACE_INTERRUPT cannot be given
				 * back to it), then the stub anew from the
				 * handler's first instruction. */
				if ((e = gb_regs_set(tid, r0)) ||
				    (e = to_interrupt_stop(tid, pending_sig, st.sig)))
					return e;
				return -EAGAIN;
			}
			sig = keep_signal(&st, pending_sig);
			break;
		case GB_STOP_SYSCALL:
			if ((e = gb_regs_get(tid, &now)))
				return e;
			if (!st.sys_exit) {
				if (now.rip == page + c->mask_end) {
					e = save_mask(tid, memfd, page);
					entered = true;
				}
				if (e)
					return e;
				break;
			}
			if (now.rip == page + c->mask_end && now.rax != 0) {
				/* Signals not blocked: no clone (the restore below
				 * runs on a mask that was not saved: put the
				 * registers back at once). */
				*ret = (long)now.rax;
				e = to_interrupt_stop(tid, pending_sig, 0);
				return e ? e : gb_regs_set(tid, fin);
			}
			if (now.rip == page + c->call_end)
				*ret = (long)now.rax;
			if (now.rip == page + c->restore_end) {
				e = to_interrupt_stop(tid, pending_sig, 0);
				return e ? e : gb_regs_set(tid, fin);
			}
			break;
		default:
			break; /* an interrupt or group stop: on */
		}
	}
	return -EIO;
}

/* Where the stub can go without a syscall: the zeros that pad the vDSO
 * image to its last page (after its last section header and segment), which
 * nothing executes or reads.  Writing there gives the process a private
 * copy of that page, same bytes once they are put back.  0 when the vDSO
 * has too little room (or is not there). */
static uint64_t vdso_slack(pid_t pid, int memfd)
{
	struct gb_maps maps;
	uint64_t at = 0;
	if (gb_maps_read(pid, &maps))
		return 0;
	for (size_t i = 0; i < maps.n && !at; i++) {
		const struct gb_map *m = &maps.v[i];
		Elf64_Ehdr eh;
		if (strcmp(m->path, "[vdso]") ||
		    pread(memfd, &eh, sizeof(eh), (off_t)m->start) != (ssize_t)sizeof(eh) ||
		    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_phentsize != sizeof(Elf64_Phdr))
			continue;
		uint64_t end = eh.e_shoff + (uint64_t)eh.e_shnum * eh.e_shentsize;
		for (unsigned k = 0; k < eh.e_phnum; k++) {
			Elf64_Phdr ph;
			off_t o = (off_t)(m->start + eh.e_phoff + k * sizeof(ph));
			if (pread(memfd, &ph, sizeof(ph), o) != (ssize_t)sizeof(ph))
				goto next;
			if (ph.p_offset + ph.p_filesz > end)
				end = ph.p_offset + ph.p_filesz;
		}
		uint64_t want = (m->end - STUB_LEN) & ~15ull;
		if (want >= m->start + end + 64)
			at = want;
	next:;
	}
	gb_maps_free(&maps);
	return at;
}

int gb_snap_stub_call(pid_t pid, pid_t tid, uint64_t insn, long nr, const uint64_t args[6],
		      long *ret, pid_t *child, int *pending_sig)
{
	struct user_regs_struct r0, fin;
	struct code c;
	uint8_t orig[STUB_LEN];
	uint64_t d[D_N], mask, at;
	char path[64];
	long mret;
	int e = 0;
	bool mapped = false;
	*ret = 0;
	*child = 0;
	if ((e = gb_regs_get(tid, &fin)))
		return e;
	r0 = fin;
	if (pending_sig && (e = prepare(tid, &r0, &fin, pending_sig)))
		return e;
	if (ptrace(PTRACE_GETSIGMASK, tid, sizeof(mask), &mask))
		return -errno;
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	build(&c);
	if (c.n > DATA_OFF) {
		close(fd);
		return -EOVERFLOW; /* cannot be: DATA_OFF is too small */
	}
	fill_data(d, &r0, mask, nr, args);
	memcpy(c.b + DATA_OFF, d, sizeof(d));
	at = vdso_slack(pid, fd);
	if (at && (pread(fd, orig, sizeof(orig), (off_t)at) != (ssize_t)sizeof(orig) ||
		   pwrite(fd, c.b, STUB_LEN, (off_t)at) != (ssize_t)STUB_LEN))
		at = 0;
	if (!at && !insn) {
		close(fd);
		return -ENOSPC;
	}
	if (!at) {
		/* No room there: a page of its own (its mmap and munmap are
		 * injected the usual way: not crash-safe, clonestub.h). */
		const uint64_t margs[6] = { 0, GB_PAGE_SIZE, PROT_READ | PROT_EXEC,
					    MAP_PRIVATE | MAP_ANONYMOUS, (uint64_t)-1, 0 };
		if ((e = gb_inject_syscall(tid, insn, SYS_mmap, margs, &mret, pending_sig)) ||
		    (mret < 0 && mret >= -4095 && (e = (int)mret))) {
			close(fd);
			return e;
		}
		at = (uint64_t)mret;
		mapped = true;
		if (pwrite(fd, c.b, STUB_LEN, (off_t)at) != (ssize_t)STUB_LEN)
			e = -EIO;
	}
	for (int again = 0; !e && again < 8; again++) {
		e = run(tid, fd, at, &c, &r0, &fin, ret, child, pending_sig);
		if (e != -EAGAIN)
			break;
		/* At an interrupt stop at its handler's entry: from there. */
		if ((e = gb_regs_get(tid, &r0)))
			break;
		fin = r0;
		if (ptrace(PTRACE_GETSIGMASK, tid, sizeof(mask), &mask)) {
			e = -errno;
			break;
		}
		fill_data(d, &r0, mask, nr, args);
		if (pwrite(fd, d, sizeof(d), (off_t)(at + DATA_OFF)) != (ssize_t)sizeof(d))
			e = -EIO;
		else if (again == 7)
			e = -EAGAIN; /* signals keep coming: not run */
	}
	/* Gone, or left to finish the stub on its own (the stub stays). */
	if (e == -ESRCH || e == -EINTR || (e && gb_regs_set(tid, &fin))) {
		close(fd);
		return e;
	}
	if (mapped) {
		const uint64_t uargs[6] = { at, GB_PAGE_SIZE, 0, 0, 0, 0 };
		long uret;
		int u = gb_inject_syscall(tid, insn, SYS_munmap, uargs, &uret, pending_sig);
		e = e ? e : u;
	} else if (pwrite(fd, orig, sizeof(orig), (off_t)at) != (ssize_t)sizeof(orig) && !e) {
		e = -EIO;
	}
	close(fd);
	return e;
}

int gb_snap_clone_stub(pid_t pid, pid_t tid, uint64_t insn, long *ret, pid_t *child, int *pending_sig)
{
	const uint64_t args[6] = { CLONE_PARENT, 0, 0, 0, 0, 0 }; /* exit signal 0; no stack, tids, tls */
	return gb_snap_stub_call(pid, tid, insn, SYS_clone, args, ret, child, pending_sig);
}
