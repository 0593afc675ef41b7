/* A target that enters seccomp before gebpf attaches (issue 23, case 4).
 * Usage: seccomp_prog MODE ITERS, MODE one of
 *   strict       SECCOMP_MODE_STRICT: read, write, exit and rt_sigreturn only
 *   kill-getpid  a filter that kills the process on getpid, allows the rest
 *   kill-mmap    a filter that kills the process on mmap and mprotect
 *   allowlist    a filter that allows read, write, exit, exit_group,
 *                rt_sigreturn and kills on anything else (syscall -1 too)
 * Then: writes "ready\n", reads one byte from stdin (the test attaches
 * gebpf meanwhile), calls `traced` ITERS times, writes "done\n", reads one
 * more byte (the test ends the trace), writes "checksum N\n" and exits
 * through SYS_exit (exit_group is not allowed in strict mode).  Only read,
 * write and exit are made after the seccomp call: nothing that allocates. */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static long table[32];

__attribute__((noinline)) long traced(long i)
{
	long s = table[i & 31];
	for (int k = 0; k < 8; k++)
		s = s * 31 + k + i;
	table[i & 31] = s & 0xffff;
	return s;
}

#define NR_LD BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define KILL_IF(n) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (n), 0, 1), \
		   BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS)
#define ALLOW_IF(n) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (n), 0, 1), \
		    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

static void put(const char *s)
{
	if (write(1, s, strlen(s)) < 0)
		syscall(SYS_exit, 3);
}

static void barrier(void)
{
	char c;
	if (read(0, &c, 1) != 1)
		syscall(SYS_exit, 4);
}

static int enter(const char *mode)
{
	struct sock_filter kill_getpid[] = { NR_LD, KILL_IF(SYS_getpid),
					     BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
	struct sock_filter kill_mmap[] = { NR_LD, KILL_IF(SYS_mmap), KILL_IF(SYS_mprotect),
					   BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
	struct sock_filter allowlist[] = { NR_LD, ALLOW_IF(SYS_read), ALLOW_IF(SYS_write),
					   ALLOW_IF(SYS_exit), ALLOW_IF(SYS_exit_group),
					   ALLOW_IF(SYS_rt_sigreturn),
					   BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS) };
	struct sock_fprog p;
	if (!strcmp(mode, "strict"))
		return prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0);
	if (!strcmp(mode, "kill-getpid"))
		p = (struct sock_fprog){ sizeof(kill_getpid) / sizeof(kill_getpid[0]), kill_getpid };
	else if (!strcmp(mode, "kill-mmap"))
		p = (struct sock_fprog){ sizeof(kill_mmap) / sizeof(kill_mmap[0]), kill_mmap };
	else if (!strcmp(mode, "allowlist"))
		p = (struct sock_fprog){ sizeof(allowlist) / sizeof(allowlist[0]), allowlist };
	else
		return -1;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p, 0, 0);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: seccomp_prog strict|kill-getpid|kill-mmap|allowlist ITERS\n");
		return 2;
	}
	long iters = atol(argv[2]);
	unsigned long sum = 0;
	char line[64];
	if (enter(argv[1])) {
		perror("seccomp");
		return 1;
	}
	put("ready\n");
	barrier();
	for (long i = 0; i < iters; i++)
		sum += (unsigned long)traced(i);
	put("done\n");
	barrier();
	snprintf(line, sizeof(line), "checksum %lu\n", sum);
	put(line);
	syscall(SYS_exit, 0);
	return 0;
}
