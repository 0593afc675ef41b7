#include "probe/features.h"

#include "common/log.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <linux/perf_event.h>
#include <string.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <unistd.h>

void gb_probe_libbpf_init(void)
{
	/* gb_libbpf_print takes the level as int; libbpf passes the enum. */
	libbpf_set_print((libbpf_print_fn_t)gb_libbpf_print);
}

void gb_probe_warn(bool quiet, const char *who, int pid, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (quiet)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	gb_warn("%s: pid %d: %s", who, pid, buf);
}

bool gb_feat_kernel_btf(void)
{
	return access("/sys/kernel/btf/vmlinux", R_OK) == 0;
}

bool gb_feat_btf_typedef(const char *name)
{
	struct btf *btf;
	bool found;

	if (!gb_feat_kernel_btf())
		return false;
	btf = btf__load_vmlinux_btf();
	if (!btf)
		return false;
	found = btf__find_by_name_kind(btf, name, BTF_KIND_TYPEDEF) > 0;
	btf__free(btf);
	return found;
}

bool gb_feat_uprobe_write_ctx(void)
{
	static int known = -1;         /* (probed once) */
	const __s16 ip = (__s16)offsetof(struct user_regs_struct, rip); /* = pt_regs.ip */
	const struct bpf_insn insns[] = {
		/* r2 = *(u64 *)(r1 + ip); *(u64 *)(r1 + ip) = r2; r0 = 0; exit */
		{ .code = BPF_LDX | BPF_MEM | BPF_DW, .dst_reg = BPF_REG_2, .src_reg = BPF_REG_1, .off = ip },
		{ .code = BPF_STX | BPF_MEM | BPF_DW, .dst_reg = BPF_REG_1, .src_reg = BPF_REG_2, .off = ip },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	if (known < 0) {
		int fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "gb_write_ctx", "GPL", insns,
				       sizeof(insns) / sizeof(insns[0]), NULL);
		known = fd >= 0;
		if (fd >= 0)
			close(fd);
	}
	return known;
}

bool gb_feat_perf_helper(int func_id)
{
	return libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, (enum bpf_func_id)func_id, NULL) == 1;
}

static const struct gb_perf_event events[] = {
	{ "cpu-clock",    PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK },
	{ "task-clock",   PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK },
	{ "cycles",       PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES },
	{ "instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS },
};

const struct gb_perf_event *gb_perf_event_find(const char *name)
{
	for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++)
		if (!strcmp(events[i].name, name))
			return &events[i];
	return NULL;
}

const char *gb_perf_event_names(void)
{
	return "cpu-clock, task-clock, cycles, instructions";
}

int gb_perf_event_probe(const struct gb_perf_event *ev)
{
	struct perf_event_attr a;
	int fd;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = ev->type;
	a.config = ev->config;
	a.freq = 1;
	a.sample_freq = 99;
	a.disabled = 1;
	/* This process on any CPU: needs no CPU to be online in particular. */
	fd = (int)syscall(__NR_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

const struct gb_perf_event *gb_perf_event_default(void)
{
	const struct gb_perf_event *hw = gb_perf_event_find("cycles");
	return gb_perf_event_probe(hw) == 0 ? hw : gb_perf_event_find("cpu-clock");
}
