/* A minimal QEMU TCG plugin writing gebpf's trace lines (docs/trace-format.md)
 * for one address range: an exec line per executed instruction whose PC lies
 * in [start, end], then a read/write line per memory access it makes, then
 * the summary line.  For bench/bench_engines.py (QEMU user mode's rate on
 * the same jobs); single-threaded guests only (vcpu is always 0).
 *
 *   qemu-x86_64 -plugin PLUGIN.so,start=0x401000,end=0x40101f,out=FILE PROG ARGS
 *
 * QEMU's own deviations remain (docs/testing.md "Emulator deviations":
 * accesses wider than 8 bytes are split into 8-byte pieces).  Built against
 * qemu-plugin.h of the installed QEMU (API version 1, QEMU 7.2), which no
 * Debian binary package ships: bench/qemu-plugin-h.sh extracts it from
 * Debian's qemu source package. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

static uint64_t lo, hi = UINT64_MAX;
static FILE *out;
static uint64_t vt, nmem;

static void on_exec(unsigned int vcpu, void *udata)
{
	(void)vcpu;
	fprintf(out, "{\"t\":\"exec\",\"vcpu\":0,\"pc\":\"0x%" PRIx64 "\",\"vt\":%" PRIu64 "}\n",
		(uint64_t)(uintptr_t)udata, vt);
	vt++;
}

static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
	(void)vcpu;
	fprintf(out, "{\"t\":\"%s\",\"vcpu\":0,\"addr\":\"0x%" PRIx64 "\",\"size\":%u,"
		"\"pc\":\"0x%" PRIx64 "\",\"vt\":%" PRIu64 "}\n",
		qemu_plugin_mem_is_store(info) ? "write" : "read", vaddr,
		1u << qemu_plugin_mem_size_shift(info), (uint64_t)(uintptr_t)udata, vt - 1);
	nmem++;
}

static void on_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	size_t n = qemu_plugin_tb_n_insns(tb);
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		uint64_t pc = qemu_plugin_insn_vaddr(insn);
		if (pc < lo || pc > hi)
			continue;
		void *u = (void *)(uintptr_t)pc;
		qemu_plugin_register_vcpu_insn_exec_cb(insn, on_exec, QEMU_PLUGIN_CB_NO_REGS, u);
		qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS,
						 QEMU_PLUGIN_MEM_RW, u);
	}
}

static void at_exit_cb(qemu_plugin_id_t id, void *p)
{
	(void)id;
	(void)p;
	fprintf(out, "{\"t\":\"summary\",\"insns\":%" PRIu64 ",\"mem\":%" PRIu64 ",\"events\":%"
		PRIu64 ",\"dropped\":0,\"exec\":true,\"start\":\"0x%" PRIx64 "\",\"end\":\"0x%"
		PRIx64 "\"}\n", vt, nmem, vt + nmem, lo, hi);
	fclose(out);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
					   int argc, char **argv)
{
	const char *path = NULL;
	(void)info;
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "start=", 6))
			lo = strtoull(argv[i] + 6, NULL, 16);
		else if (!strncmp(argv[i], "end=", 4))
			hi = strtoull(argv[i] + 4, NULL, 16);
		else if (!strncmp(argv[i], "out=", 4))
			path = argv[i] + 4;
		else {
			fprintf(stderr, "qemu_trace_plugin: unknown argument %s\n", argv[i]);
			return -1;
		}
	}
	out = path ? fopen(path, "w") : stdout;
	if (!out) {
		perror(path);
		return -1;
	}
	static char buf[1 << 20];
	setvbuf(out, buf, _IOFBF, sizeof(buf));
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb);
	qemu_plugin_register_atexit_cb(id, at_exit_cb, NULL);
	return 0;
}
