/* ptrace/seccomp.c: a thread's seccomp state read back (the mode from
 * /proc, the filters with PTRACE_SECCOMP_GET_FILTER) and run on system calls
 * as the kernel runs them: argument tests, stacked filters (the most
 * restrictive action wins), the skipped syscall -1, strict mode. */
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptrace/procfs.h"
#include "ptrace/seccomp.h"

#define LD(field) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, field))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))

static void install(struct sock_filter *f, unsigned short n)
{
	struct sock_fprog p = { n, f };
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p, 0, 0))
		_exit(10);
}

/* A child under three filters, stopped under ptrace (TRACEME + SIGSTOP). */
static pid_t filtered_child(void)
{
	pid_t c = fork();
	cr_assert_geq(c, 0);
	if (c == 0) {
		/* 1 (oldest): wrong arch kills; mprotect adding PROT_EXEC: EPERM
		 * (ALU and JSET on the low word of args[2]). */
		struct sock_filter f1[] = {
			LD(arch),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xc000003e /* AUDIT_ARCH_X86_64 */, 1, 0),
			RET(SECCOMP_RET_KILL_PROCESS),
			LD(nr),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mprotect, 0, 4),
			LD(args[2]),
			BPF_STMT(BPF_ALU | BPF_AND | BPF_K, PROT_EXEC | PROT_WRITE),
			BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 0, 1),
			RET(SECCOMP_RET_ERRNO | EPERM),
			RET(SECCOMP_RET_ALLOW),
		};
		/* 2: mmap kills the process. */
		struct sock_filter f2[] = {
			LD(nr),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 0, 1),
			RET(SECCOMP_RET_KILL_PROCESS),
			RET(SECCOMP_RET_ALLOW),
		};
		/* 3 (newest): munmap and mprotect trap (SIGSYS), through the
		 * scratch memory and X; nr > 400 logs. */
		struct sock_filter f3[] = {
			LD(nr),
			BPF_STMT(BPF_ST, 3),
			BPF_STMT(BPF_LDX | BPF_W | BPF_MEM, 3),
			BPF_STMT(BPF_MISC | BPF_TXA, 0),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_munmap, 2, 0),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mprotect, 1, 0),
			BPF_JUMP(BPF_JMP | BPF_JA, 1, 0, 0),
			RET(SECCOMP_RET_TRAP),
			BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 400, 0, 1),
			RET(SECCOMP_RET_LOG),
			RET(SECCOMP_RET_ALLOW),
		};
		if (ptrace(PTRACE_TRACEME, 0, 0, 0) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
			_exit(9);
		install(f1, sizeof(f1) / sizeof(f1[0]));
		install(f2, sizeof(f2) / sizeof(f2[0]));
		install(f3, sizeof(f3) / sizeof(f3[0]));
		raise(SIGSTOP);
		_exit(0);
	}
	int st;
	cr_assert_eq(waitpid(c, &st, 0), c);
	cr_assert(WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP, "child status %#x", st);
	return c;
}

static uint32_t act(const struct gb_seccomp *s, long nr, uint64_t a2)
{
	const uint64_t args[6] = { 0x1000, 0x1000, a2, 0, 0, 0 };
	return gb_seccomp__action(s, nr, args, 0x401000);
}

Test(seccomp, filters_are_run_as_the_kernel_runs_them)
{
	if (geteuid() != 0)
		cr_skip_test("reading a seccomp filter back needs CAP_SYS_ADMIN");
	pid_t c = filtered_child();
	int mode, nf;
	struct gb_seccomp *s;
	cr_assert_eq(gb_proc_seccomp(c, &mode, &nf), 0);
	cr_assert_eq(mode, SECCOMP_MODE_FILTER);
	cr_assert(nf == 3 || nf == -1, "%d filters", nf);
	int r = gb_seccomp__read(c, &mode, &s);
	if (r == -EINVAL || r == -EMEDIUMTYPE) {
		kill(c, SIGKILL);
		cr_skip_test("this kernel cannot hand seccomp filters back (%d)", r);
	}
	cr_assert_eq(r, 0);
	cr_assert_not_null(s);
	cr_assert_eq(act(s, SYS_getpid, 0), SECCOMP_RET_ALLOW);
	/* -1 is 0xffffffff to a filter: above 400, unsigned. */
	cr_assert_eq(act(s, -1, 0), SECCOMP_RET_LOG);
	cr_assert_eq(act(s, SYS_mmap, 0), SECCOMP_RET_KILL_PROCESS);
	/* filter 1 says ERRNO for PROT_EXEC, filter 3 TRAP for any mprotect:
	 * TRAP is the more restrictive. */
	cr_assert_eq(act(s, SYS_mprotect, PROT_READ), SECCOMP_RET_TRAP);
	cr_assert_eq(act(s, SYS_munmap, 0), SECCOMP_RET_TRAP);
	cr_assert_eq(act(s, 435, 0), SECCOMP_RET_LOG);
	char buf[48];
	cr_assert_str_eq(gb_seccomp_action_name(SECCOMP_RET_ERRNO | EPERM, buf, sizeof(buf)),
			 "fail it with errno 1");
	gb_seccomp__free(s);
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
}

Test(seccomp, errno_action_and_argument_tests)
{
	if (geteuid() != 0)
		cr_skip_test("reading a seccomp filter back needs CAP_SYS_ADMIN");
	pid_t c = fork();
	cr_assert_geq(c, 0);
	if (c == 0) {
		struct sock_filter f[] = {
			LD(nr),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mprotect, 0, 3),
			LD(args[2]),
			BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 0, 1),
			RET(SECCOMP_RET_ERRNO | EPERM),
			RET(SECCOMP_RET_ALLOW),
		};
		if (ptrace(PTRACE_TRACEME, 0, 0, 0) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
			_exit(9);
		void *pg = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		install(f, sizeof(f) / sizeof(f[0]));
		/* What the kernel itself answers, for the parent to compare. */
		if (mprotect(pg, 4096, PROT_READ) || !mprotect(pg, 4096, PROT_READ | PROT_EXEC) ||
		    errno != EPERM)
			_exit(11);
		raise(SIGSTOP);
		_exit(0);
	}
	int st, mode;
	struct gb_seccomp *s;
	cr_assert_eq(waitpid(c, &st, 0), c);
	cr_assert(WIFSTOPPED(st), "the kernel answered differently (child status %#x)", st);
	int r = gb_seccomp__read(c, &mode, &s);
	if (r == -EINVAL || r == -EMEDIUMTYPE) {
		kill(c, SIGKILL);
		cr_skip_test("this kernel cannot hand seccomp filters back (%d)", r);
	}
	cr_assert_eq(r, 0);
	cr_assert_eq(act(s, SYS_mprotect, PROT_READ), SECCOMP_RET_ALLOW);
	cr_assert_eq(act(s, SYS_mprotect, PROT_READ | PROT_EXEC), SECCOMP_RET_ERRNO | EPERM);
	gb_seccomp__free(s);
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
}

Test(seccomp, strict_mode_allows_read_write_exit_only)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pid_t c = fork();
	cr_assert_geq(c, 0);
	if (c == 0) {
		char b;
		close(p[1]);
		if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0))
			_exit(9);
		while (read(p[0], &b, 1) != 0) /* blocks until the parent closes */
			;
		syscall(SYS_exit, 0);
	}
	close(p[0]);
	int mode = 0, nf;
	for (int i = 0; i < 500 && mode != SECCOMP_MODE_STRICT; i++) {
		cr_assert_eq(gb_proc_seccomp(c, &mode, &nf), 0);
		usleep(2000);
	}
	cr_assert_eq(mode, SECCOMP_MODE_STRICT);
	struct gb_seccomp *s;
	cr_assert_eq(gb_seccomp__read(c, &mode, &s), 0);
	cr_assert_not_null(s);
	cr_assert_eq(act(s, SYS_read, 0), SECCOMP_RET_ALLOW);
	cr_assert_eq(act(s, SYS_write, 0), SECCOMP_RET_ALLOW);
	cr_assert_eq(act(s, SYS_exit, 0), SECCOMP_RET_ALLOW);
	cr_assert_eq(act(s, SYS_rt_sigreturn, 0), SECCOMP_RET_ALLOW);
	cr_assert_eq(act(s, SYS_exit_group, 0), SECCOMP_RET_KILL_THREAD);
	cr_assert_eq(act(s, SYS_mmap, 0), SECCOMP_RET_KILL_THREAD);
	cr_assert_eq(act(s, -1, 0), SECCOMP_RET_KILL_THREAD);
	gb_seccomp__free(s);
	close(p[1]);
	int st;
	cr_assert_eq(waitpid(c, &st, 0), c);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
}

Test(seccomp, no_seccomp_is_null)
{
	int mode = -1;
	struct gb_seccomp *s = (void *)1;
	cr_assert_eq(gb_seccomp__read(getpid(), &mode, &s), 0);
	cr_assert_eq(mode, 0);
	cr_assert_null(s);
	cr_assert_eq(gb_seccomp__action(NULL, SYS_mmap, (uint64_t[6]){ 0 }, 0), SECCOMP_RET_ALLOW);
}
