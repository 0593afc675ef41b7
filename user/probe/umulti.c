/* uprobe_multi links by raw bpf(2): umulti.h. */
#include "probe/umulti.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <linux/bpf.h>
#include <string.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

/* The BPF_LINK_CREATE part of union bpf_attr with its uprobe_multi member
 * (Linux 6.6 include/uapi/linux/bpf.h), zero tail included: the kernel
 * refuses an attr whose bytes beyond what it knows are not zero. */
struct link_create_umulti {
	uint32_t prog_fd;
	uint32_t target_fd;
	uint32_t attach_type;
	uint32_t flags;
	uint64_t path;
	uint64_t offsets;
	uint64_t ref_ctr_offsets;
	uint64_t cookies;
	uint32_t cnt;
	uint32_t uflags;
	uint32_t pid;
	uint32_t tail[13];
};

static int link_create(int prog_fd, const char *path, const uint64_t *offs,
		       const uint64_t *cookies, size_t n, pid_t pid)
{
	struct link_create_umulti a;
	int fd;

	memset(&a, 0, sizeof(a));
	a.prog_fd = (uint32_t)prog_fd;
	a.attach_type = GB_BPF_TRACE_UPROBE_MULTI;
	a.path = (uint64_t)(uintptr_t)path;
	a.offsets = (uint64_t)(uintptr_t)offs;
	a.cookies = (uint64_t)(uintptr_t)cookies;
	a.cnt = (uint32_t)n;
	a.pid = (uint32_t)pid;
	fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
	return fd < 0 ? -errno : fd;
}

bool gb_umulti_supported(void)
{
	static int known = -1;
	struct bpf_insn ret0[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o,
		    .expected_attach_type = (enum bpf_attach_type)GB_BPF_TRACE_UPROBE_MULTI);
	uint64_t off = 0;
	int prog, fd;

	if (known >= 0)
		return known;
	/* Before 6.10 a uprobe_multi link's pid filter ran the program for
	 * the process's main thread only (fixed by "bpf: fix multi-uprobe PID
	 * filtering logic", v6.10): the other threads would enter unseen. */
	struct utsname u;
	int maj = 0, min = 0;
	if (uname(&u) || sscanf(u.release, "%d.%d", &maj, &min) != 2 ||
	    maj * 1000 + min < 6010)
		return (known = 0);
	prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "gb_umulti_probe", "GPL", ret0, 2, &o);
	if (prog < 0)
		return (known = 0);
	/* "/" is no regular file: a kernel with uprobe_multi looks the path
	 * up and says EBADF; one without refuses the attach type (EINVAL). */
	fd = link_create(prog, "/", &off, NULL, 1, 0);
	if (fd >= 0)
		close(fd);
	close(prog);
	return (known = (fd == -EBADF));
}

int gb_umulti_attach(int prog_fd, const char *path, const uint64_t *offs,
		     const uint64_t *cookies, size_t n, pid_t pid)
{
	return link_create(prog_fd, path, offs, cookies, n, pid);
}
