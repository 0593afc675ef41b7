/* The DWARF unwinder (user/unwind/unwind.c) on a process that has exited
 * while its samples are still queued, as when gebpf's user side lags
 * behind the target (a slow machine; QEMU TCG in scripts/kmatrix):
 * the modules read while it lived must still name and unwind its samples
 * once it is a zombie (its /proc/PID/maps empty, its /proc/PID/root
 * unopenable) and once it is reaped.
 *
 * The target is a fork of this test binary, stopped in pause(): the same
 * modules at the same addresses as ours, so a stack of ours (registers from
 * getcontext(), the stack above them copied) is a stack of it.
 * Run: .output/unit-tests --filter 'unwind/...' (the suite unwind). */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "unwind/unwind.h"
#include "unit_progs.h"

#define COPY_MAX (64u << 10)

struct captured {
	struct gb_user_regs regs;
	uint8_t stack[COPY_MAX];
	size_t len;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Registers as a sample would bring them, and the stack above them up to
 * its end (or COPY_MAX bytes): what bpf/sample.bpf.c copies. */
__attribute__((noinline)) static void capture(struct captured *c)
{
	ucontext_t uc;
	pthread_attr_t a;
	void *lo;
	size_t size;

	cr_assert_eq(getcontext(&uc), 0);
	const greg_t *g = uc.uc_mcontext.gregs;
	c->regs = (struct gb_user_regs){
		.r15 = g[REG_R15], .r14 = g[REG_R14], .r13 = g[REG_R13], .r12 = g[REG_R12],
		.bp = g[REG_RBP], .bx = g[REG_RBX], .r11 = g[REG_R11], .r10 = g[REG_R10],
		.r9 = g[REG_R9], .r8 = g[REG_R8], .ax = g[REG_RAX], .cx = g[REG_RCX],
		.dx = g[REG_RDX], .si = g[REG_RSI], .di = g[REG_RDI], .ip = g[REG_RIP],
		.sp = g[REG_RSP],
	};
	cr_assert_eq(pthread_getattr_np(pthread_self(), &a), 0);
	cr_assert_eq(pthread_attr_getstack(&a, &lo, &size), 0);
	pthread_attr_destroy(&a);
	uintptr_t top = (uintptr_t)lo + size;
	c->len = top - c->regs.sp < COPY_MAX ? top - c->regs.sp : COPY_MAX;
	/* Read as the kernel does, not with memcpy: other frames' bytes
	 * include AddressSanitizer's redzones in a SANITIZE=1 build. */
	struct iovec local = { c->stack, c->len };
	struct iovec remote = { (void *)(uintptr_t)c->regs.sp, c->len };
	cr_assert_eq(process_vm_readv(getpid(), &local, 1, &remote, 1, 0), (ssize_t)c->len);
}

/* A known chain above the captured frame; each does work after its call so
 * that no call becomes a jump. */
static volatile int sink;
__attribute__((noinline)) void gb_unw_leaf(struct captured *c) { capture(c); sink++; }
__attribute__((noinline)) void gb_unw_mid(struct captured *c) { gb_unw_leaf(c); sink++; }
__attribute__((noinline)) void gb_unw_top(struct captured *c) { gb_unw_mid(c); sink++; }

static pid_t start_target(void)
{
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);   /* a failed test leaves nothing behind */
		for (;;)
			pause();
	}
	return pid;
}

/* Kill the target and wait until it is a zombie, without reaping it. */
static void make_zombie(pid_t pid)
{
	siginfo_t si;
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
	char path[64], buf[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	FILE *f = fopen(path, "r");
	cr_assert(f);
	cr_assert_null(fgets(buf, sizeof(buf), f), "a zombie maps nothing");
	fclose(f);
}

/* The function names of pcs[0..n) (return addresses after the first). */
static void names(struct gb_unwinder *u, pid_t pid, const uint64_t *pcs, int n, char out[][64])
{
	for (int i = 0; i < n; i++) {
		struct gb_frame_info fi;
		int rc = gb_unwinder__describe(u, pid, pcs[i], i > 0, &fi);
		snprintf(out[i], 64, "%s", rc == 0 && fi.func ? fi.func : "?");
	}
}

static void check_unwinds(struct gb_unwinder *u, pid_t pid, const struct captured *c)
{
	uint64_t pcs[128];
	char nm[128][64];
	bool complete = false;
	int n = gb_unwinder__unwind(u, pid, pid, &c->regs, c->stack, c->len, pcs, 128, &complete);

	cr_assert_geq(n, 3, "unwound %d frame(s) only", n);
	names(u, pid, pcs, 3, nm);
	cr_assert_str_eq(nm[0], "capture");
	cr_assert_str_eq(nm[1], "gb_unw_leaf");
	cr_assert_str_eq(nm[2], "gb_unw_mid");
	names(u, pid, pcs, n, nm);
	bool top = false;
	for (int i = 3; i < n; i++)
		top |= strcmp(nm[i], "gb_unw_top") == 0;
	cr_assert(top, "gb_unw_top not among the %d frames", n);
}

Test(unwind, exited_process_keeps_its_modules)
{
	static struct captured c;
	struct gb_unwinder *u = gb_unwinder__new();
	pid_t pid = start_target();
	struct gb_frame_info fi;
	int st;

	cr_assert(u);
	gb_unw_top(&c);
	/* Read while it lives (gebpf does so right after a launched
	 * command's exec, and whenever a sample's pc is in no module). */
	gb_unwinder__prepare(u, pid);
	make_zombie(pid);

	/* A sample taken after that read whose pc is in no module (the vDSO,
	 * say) makes the unwinder read the maps again: now empty. */
	gb_unwinder__sample_time(u, pid, now_ns());
	cr_assert_eq(gb_unwinder__describe(u, pid, 0x1000, false, &fi), -ENOENT);

	/* Its modules are still known, their files open: named and unwound. */
	cr_assert_eq(gb_unwinder__describe(u, pid, (uint64_t)(uintptr_t)gb_unw_mid, false, &fi), 0);
	cr_assert_str_eq(fi.func, "gb_unw_mid");
	cr_assert_eq(fi.func_off, 0);
	check_unwinds(u, pid, &c);

	/* Reaped: /proc/PID is gone; still the same. */
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	gb_unwinder__sample_time(u, pid, now_ns());
	cr_assert_eq(gb_unwinder__describe(u, pid, 0x1000, false, &fi), -ENOENT);
	check_unwinds(u, pid, &c);
	gb_unwinder__free(u);
}

/* A target that stops itself, and once continued dlopens lib, writes the
 * address of its function sym to *rfd's pipe and pauses. */
static pid_t start_loader(const char *lib, const char *sym, int *rfd)
{
	int fds[2];
	siginfo_t si;

	cr_assert_eq(pipe(fds), 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(fds[0]);
		raise(SIGSTOP);
		void *h = dlopen(lib, RTLD_NOW);
		uint64_t a = h ? (uint64_t)(uintptr_t)dlsym(h, sym) : 0;
		if (write(fds[1], &a, sizeof(a)) != sizeof(a))
			_exit(1);
		for (;;)
			pause();
	}
	close(fds[1]);
	cr_assert_eq(waitid(P_PID, (id_t)pid, &si, WSTOPPED), 0);
	*rfd = fds[0];
	return pid;
}

/* A library mapped after the first read of the maps, and the process gone
 * before any of its samples is named (gebpf's drain far behind): the
 * periodic refresh saw the library while the process lived; an unwinder
 * without it knows only the maps of the start. */
Test(unwind, refresh_sees_a_library_mapped_before_the_exit)
{
	char lib[4096];
	uint64_t addr = 0;
	struct gb_frame_info fi;
	int rfd, st;

	if (unit_prog_path("lib/libunwindleaf.so", lib, sizeof(lib)))
		cr_skip_test("%s is not built (make progs)", lib);
	struct gb_unwinder *u = gb_unwinder__new(), *plain = gb_unwinder__new();
	cr_assert(u && plain);
	pid_t pid = start_loader(lib, "leaf_hot", &rfd);
	gb_unwinder__prepare(u, pid);
	gb_unwinder__prepare(plain, pid);
	cr_assert_eq(kill(pid, SIGCONT), 0);
	cr_assert_eq(read(rfd, &addr, sizeof(addr)), (ssize_t)sizeof(addr));
	close(rfd);
	cr_assert_neq(addr, 0, "the target could not dlopen %s", lib);

	cr_assert_geq(gb_unwinder__refresh(u, 0, 0), 1, "the prepared target was not read again");
	make_zombie(pid);
	/* Its samples are named now, after its exit. */
	uint64_t t = now_ns();
	gb_unwinder__sample_time(u, pid, t);
	gb_unwinder__sample_time(plain, pid, t);
	cr_assert_eq(gb_unwinder__describe(u, pid, addr, false, &fi), 0);
	cr_assert_str_eq(fi.func, "leaf_hot");
	cr_assert(gb_unwinder__describe(plain, pid, addr, false, &fi) != 0 || !fi.func ||
		  strcmp(fi.func, "leaf_hot"), "named without the refresh: the test shows nothing");
	/* Found exited (its maps empty) at the next refresh: never read again. */
	gb_unwinder__refresh(u, 0, 0);
	cr_assert_eq(gb_unwinder__refresh(u, 0, 0), 0);
	cr_assert_eq(gb_unwinder__describe(u, pid, addr, false, &fi), 0);
	cr_assert_str_eq(fi.func, "leaf_hot");
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	gb_unwinder__free(u);
	gb_unwinder__free(plain);
}

/* The same with a maps keeper (gebpf sample's), and the drain stuck (a
 * long first unwind on a slow machine: the 6.12 guest's stacks cell):
 * nothing of this thread reads the maps between the dlopen and the exit.
 * The keeper's thread did, and the library is named after the exit. */
Test(unwind, the_keeper_read_a_library_mapped_before_the_exit)
{
	char lib[4096];
	uint64_t addr = 0;
	struct gb_frame_info fi;
	int rfd, st;

	if (unit_prog_path("lib/libunwindleaf.so", lib, sizeof(lib)))
		cr_skip_test("%s is not built (make progs)", lib);
	struct gb_unwinder *u = gb_unwinder__new();
	cr_assert(u);
	cr_assert_eq(gb_unwinder__keep(u, 20000000ull, 5000000000ull), 0);
	pid_t pid = start_loader(lib, "leaf_hot", &rfd);
	gb_unwinder__prepare(u, pid);    /* (its maps read here: before the dlopen) */
	cr_assert_eq(kill(pid, SIGCONT), 0);
	cr_assert_eq(read(rfd, &addr, sizeof(addr)), (ssize_t)sizeof(addr));
	close(rfd);
	cr_assert_neq(addr, 0, "the target could not dlopen %s", lib);
	/* (the keeper's rounds every 20 ms: 25 of them while it lives) */
	usleep(500000);
	make_zombie(pid);
	uint64_t t = now_ns();
	gb_unwinder__sample_time(u, pid, t);
	cr_assert_eq(gb_unwinder__describe(u, pid, addr, false, &fi), 0);
	cr_assert_str_eq(fi.func, "leaf_hot");
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	gb_unwinder__free(u);
}

Test(unwind, live_process_unwinds_to_its_outermost_frame)
{
	static struct captured c;
	struct gb_unwinder *u = gb_unwinder__new();
	pid_t pid = start_target();
	uint64_t pcs[128];
	bool complete = false;
	int st;

	cr_assert(u);
	gb_unw_top(&c);
	check_unwinds(u, pid, &c);
	/* Every frame's data lies in the copy: the walk reaches the outermost
	 * frame (_start, or the thread's start). */
	int n = gb_unwinder__unwind(u, pid, pid, &c.regs, c.stack, c.len, pcs, 128, &complete);
	cr_assert(n < 128 && complete, "n %d, complete %d, len %zu", n, complete, c.len);
	/* A copy too short for the frame above the first: truncated. */
	n = gb_unwinder__unwind(u, pid, pid, &c.regs, c.stack, 8, pcs, 128, &complete);
	cr_assert(!complete);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	gb_unwinder__free(u);
}

/* An image (a snapshot's view: maps text, memory by callback) of this very
 * process walks to the same pcs as the live unwinder on a fork of it, and
 * reports each frame's stack pointer (frame 0: the registers'). */
static bool read_copy(void *ctx, uint64_t addr, uint64_t *word)
{
	const struct captured *c = ctx;
	uint64_t sp = c->regs.sp;
	if (addr < sp || addr - sp > c->len || c->len - (addr - sp) < sizeof(*word))
		return false;
	memcpy(word, c->stack + (addr - sp), sizeof(*word));
	return true;
}

struct walked {
	struct gb_unwind_frame f[128];
	int n;
};

static bool keep(void *ctx, const struct gb_unwind_frame *f)
{
	struct walked *w = ctx;
	w->f[w->n++] = *f;
	return w->n < 128 && f->pc != 0;
}

Test(unwind, image_walks_as_the_live_unwinder)
{
	static struct captured c;
	static struct walked w;
	static char maps[1 << 20];
	struct gb_unwinder *live = gb_unwinder__new(), *img = gb_unwinder__new();
	pid_t pid = start_target(), fake = 999999;
	uint64_t pcs[128];
	bool complete;
	struct gb_frame_info fi;
	int st;

	cr_assert(live && img);
	FILE *f = fopen("/proc/self/maps", "r");
	cr_assert(f);
	size_t len = fread(maps, 1, sizeof(maps) - 1, f);
	fclose(f);
	gb_unw_top(&c);
	cr_assert_eq(gb_unwinder__walk(img, fake, fake, &c.regs, keep, &w), -ENOENT, "not an image yet");
	cr_assert_eq(gb_unwinder__add_image(img, fake, maps, len, read_copy, &c), 0);
	cr_assert_eq(gb_unwinder__add_image(img, fake, maps, len, read_copy, &c), -EEXIST);
	gb_unwinder__walk(img, fake, fake, &c.regs, keep, &w);
	int n = gb_unwinder__unwind(live, pid, pid, &c.regs, c.stack, c.len, pcs, 128, &complete);
	cr_assert_geq(w.n, 3);
	cr_assert_eq(w.f[0].pc, c.regs.ip);
	cr_assert_eq(w.f[0].sp, c.regs.sp);
	cr_assert(w.f[0].activation && !w.f[1].activation);
	for (int i = 0; i < n; i++)
		cr_assert_eq(w.f[i].pc, pcs[i], "frame %d: %#lx vs %#lx", i, w.f[i].pc, pcs[i]);
	for (int i = 1; i < n && i < w.n; i++)
		cr_assert_gt(w.f[i].sp, w.f[i - 1].sp, "frame %d's sp is above its callee's", i);
	cr_assert_eq(gb_unwinder__symbol(img, fake, w.f[1].pc, true, &fi), 0);
	cr_assert_str_eq(fi.func, "gb_unw_leaf");
	cr_assert_null(fi.file, "symbol() reads no line tables");
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	gb_unwinder__free(live);
	gb_unwinder__free(img);
}
