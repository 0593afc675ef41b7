/* The page trap's view of a process (user/trap/pages/pagetrap.h) against a real
 * child: which addresses it counts as trapped for a range of any size, and
 * which faults are its own.  Nothing is armed (no ptrace needed beyond
 * reading the child's memory: root, or skipped). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/page.h"
#include "trap/pages/pagetrap.h"

#define BASE 0x5a5a00000000ull   /* the child's layout: */
/* BASE: rw-, BASE+1p .. BASE+3p: r-x (3 pages), BASE+4p: rw- */

static pid_t child(void)
{
	int gate[2];
	char b = 0;
	cr_assert(pipe(gate) == 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		uint8_t *p = mmap((void *)BASE, 5 * GB_PAGE_SIZE, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (p == MAP_FAILED)
			_exit(1);
		for (int i = 0; i < 5 * 4096; i++)
			p[i] = 0x90;
		if (mprotect(p + GB_PAGE_SIZE, 3 * GB_PAGE_SIZE, PROT_READ | PROT_EXEC))
			_exit(2);
		if (write(gate[1], &b, 1) != 1)
			_exit(3);
		for (;;)
			pause();
	}
	close(gate[1]);
	cr_assert_eq(read(gate[0], &b, 1), 1, "the child did not set up its pages");
	close(gate[0]);
	return pid;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct gb_stop segv(uint64_t addr)
{
	return (struct gb_stop){ .kind = GB_STOP_SIGNAL, .sig = SIGSEGV, .code = SEGV_ACCERR,
				 .fault_addr = addr };
}

Test(pagetrap, huge_range_follows_the_mappings, .timeout = 30)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to read another process's memory");
	pid_t pid = child();
	double t0 = now();
	/* 112 TiB (2^35 pages), all but the libraries and the vDSO at 0x7f...
	 * (a syscall instruction to inject through must stay outside). */
	struct gb_pagetrap *p = gb_pagetrap__new(pid, 0, 0x6fffffffffffull);
	double took = now() - t0;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	cr_assert_not_null(p);
	cr_assert(took < 2, "gb_pagetrap__new over 112 TiB took %.1f s", took);
	uint64_t x = BASE + GB_PAGE_SIZE, end = BASE + 4 * GB_PAGE_SIZE;
	cr_assert(gb_pagetrap__covers(p, x));
	cr_assert(gb_pagetrap__covers(p, end - 1));
	cr_assert_not(gb_pagetrap__covers(p, end));            /* rw- after */
	cr_assert_not(gb_pagetrap__covers(p, BASE));           /* rw- before... */
	cr_assert(gb_pagetrap__covers(p, x - 14));             /* ...but an insn there may end on x */
	cr_assert_not(gb_pagetrap__covers(p, x - 15));
	gb_pagetrap__free(p);
}

Test(pagetrap, fetch_faults, .timeout = 30)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to read another process's memory");
	pid_t pid = child();
	struct gb_pagetrap *p = gb_pagetrap__new(pid, BASE + 2 * GB_PAGE_SIZE, BASE + 2 * GB_PAGE_SIZE + 10);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	cr_assert_not_null(p);
	uint64_t x = BASE + 2 * GB_PAGE_SIZE;  /* the one trapped page */
	struct gb_stop st = segv(x);
	cr_assert(gb_pagetrap__is_fetch_fault(p, &st, x));          /* at rip */
	cr_assert(gb_pagetrap__is_fetch_fault(p, &st, x - 3));      /* crossing onto it */
	cr_assert(gb_pagetrap__is_fetch_fault(p, &st, x - 14));
	cr_assert_not(gb_pagetrap__is_fetch_fault(p, &st, x - 15)); /* too far: a data access */
	st = segv(x + 8);
	cr_assert(gb_pagetrap__is_fetch_fault(p, &st, x + 8));
	cr_assert_not(gb_pagetrap__is_fetch_fault(p, &st, x + 2));  /* mid-page, not rip */
	st = segv(x + GB_PAGE_SIZE);
	cr_assert_not(gb_pagetrap__is_fetch_fault(p, &st, x + GB_PAGE_SIZE - 2)); /* not trapped */
	st = segv(x);
	st.code = 1; /* SEGV_MAPERR */
	cr_assert_not(gb_pagetrap__is_fetch_fault(p, &st, x));
	gb_pagetrap__free(p);
}
