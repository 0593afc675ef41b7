/* bench_qemu.py's anchor: the plainest QEMU TCG plugin that writes gebpf's
 * trace lines (docs/trace-format.md) for one vCPU, as a user would write one
 * in an afternoon: an exec callback and a memory callback on each in-range
 * instruction, each printing its line at once with fprintf into a 1 MiB
 * stdio buffer.  No budget, no summary, no lock, no zstd, no QEMU 7.2
 * quirk handling: it is the speed to beat, not a tracer (gebpf's own plugin
 * is user/qemu/, docs/qemu.md).  Its lines are byte for byte those of
 * gebpf's plugin on bench/shortcall (bench_qemu.py checks it).
 *
 *     qemu-x86_64 -plugin plainplugin.so,lo=HEX,hi=HEX,out=FILE PROG ...
 *
 * lo and hi are inclusive guest addresses; out defaults to stdout. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

static FILE *out;
static uint64_t lo, hi = UINT64_MAX, vt, cur_vt, cur_pc;

static void on_exec(unsigned int vcpu, void *udata)
{
	cur_pc = (uint64_t)(uintptr_t)udata;
	cur_vt = vt++;
	fprintf(out, "{\"t\":\"exec\",\"vcpu\":%u,\"pc\":\"0x%" PRIx64 "\",\"vt\":%" PRIu64 "}\n",
		vcpu, cur_pc, cur_vt);
}

static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
	(void)udata;
	fprintf(out, "{\"t\":\"%s\",\"vcpu\":%u,\"addr\":\"0x%" PRIx64 "\",\"size\":%u,"
		"\"pc\":\"0x%" PRIx64 "\",\"vt\":%" PRIu64 "}\n",
		qemu_plugin_mem_is_store(info) ? "write" : "read", vcpu, vaddr,
		1u << qemu_plugin_mem_size_shift(info), cur_pc, cur_vt);
}

static void on_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	for (size_t i = 0; i < qemu_plugin_tb_n_insns(tb); i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		uint64_t pc = qemu_plugin_insn_vaddr(insn);
		if (pc < lo || pc > hi)
			continue;
		qemu_plugin_register_vcpu_insn_exec_cb(insn, on_exec, QEMU_PLUGIN_CB_NO_REGS,
						       (void *)(uintptr_t)pc);
		qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS,
						 QEMU_PLUGIN_MEM_RW, NULL);
	}
}

static void at_exit(qemu_plugin_id_t id, void *p)
{
	(void)id;
	(void)p;
	fflush(out);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
					   int argc, char **argv)
{
	const char *path = NULL;
	(void)info;
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "lo=", 3))
			lo = strtoull(argv[i] + 3, NULL, 16);
		else if (!strncmp(argv[i], "hi=", 3))
			hi = strtoull(argv[i] + 3, NULL, 16);
		else if (!strncmp(argv[i], "out=", 4))
			path = argv[i] + 4;
	}
	out = path ? fopen(path, "w") : stdout;
	if (!out || setvbuf(out, NULL, _IOFBF, 1 << 20))
		return -1;
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
