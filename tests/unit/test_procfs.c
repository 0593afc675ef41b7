/* The /proc readers (user/ptrace/procfs.c) on this test process, against
 * what system calls say of it.
 * Run: .output/unit-tests --filter 'procfs/...' (the suite procfs). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ptrace/procfs.h"

Test(procfs, stat_fields_in_one_read)
{
	uint64_t f[52];
	cr_assert_eq(setpriority(PRIO_PROCESS, 0, 3), 0);
	cr_assert_eq(gb_proc_stat_nums(getpid(), f, 51), 0);
	cr_assert_eq(f[3], 0, "the state letter is no number");
	cr_assert_eq(f[4], (uint64_t)getppid());
	cr_assert_eq((int)(int64_t)f[19], 3, "nice");
	uint64_t brk;
	cr_assert_eq(gb_proc_stat_num(getpid(), 47, &brk), 0);
	cr_assert_eq(f[47], brk, "start_brk as the one-field reader has it");
	static uint64_t many[401];
	cr_assert_eq(gb_proc_stat_nums(getpid(), many, 400), -ENOENT);
	cr_assert_eq(gb_proc_stat_nums(0x7ffffff0, f, 51), -ESRCH);
}

Test(procfs, thread_status)
{
	struct gb_proc_status st;
	cr_assert_eq(gb_proc_status(getpid(), gettid(), &st), 0);
	cr_assert_eq(st.ppid, getppid());
	cr_assert_eq(st.uid, getuid());
	cr_assert(st.state == 'R' || st.state == 'S', "state %c", st.state);
	cr_assert_geq(st.levels, 1);
	cr_assert_eq(gb_proc_status(getpid(), 0x7ffffff0, &st), -ESRCH);
}

Test(procfs, fdinfo_and_slurp)
{
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	uint64_t pos = 99;
	uint32_t flags = 0;
	uint8_t *buf;
	size_t len;
	cr_assert_geq(fd, 0);
	cr_assert_eq(lseek(fd, 12, SEEK_SET), 12);
	cr_assert_eq(gb_proc_fdinfo(getpid(), fd, &pos, &flags), 0);
	cr_assert_eq(pos, 12);
	cr_assert_eq(flags & (O_ACCMODE | O_CLOEXEC), O_RDONLY | O_CLOEXEC, "flags %#o", flags);
	close(fd);
	cr_assert_neq(gb_proc_fdinfo(getpid(), fd, &pos, &flags), 0, "a closed fd");
	/* A file whose size stat() does not give (0 for /proc files). */
	cr_assert_eq(gb_proc_slurp(getpid(), "maps", &buf, &len), 0);
	cr_assert_eq(strlen((char *)buf), len);
	cr_assert(len > 0 && buf[len - 1] == '\n');
	free(buf);
}
