/* The code cache's region in a target: see jitmap.h. */
#include "trace/jitmap.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "common/page.h"
#include "jit/jit.h"
#include "ptrace/inject.h"
#include "ptrace/maps.h"
#include "ptrace/procfs.h"
#include "ptrace/clonestub.h"

/* A free hole of GB_JIT_SIZE bytes within 1 GiB of the range (RIP-relative
 * operands of the range reach +-2 GiB), or 0.  Nearest the range, except
 * in the hole the program's brk heap grows into: there as high as the
 * reach allows, so the heap keeps its room. */
static uint64_t find_hole(pid_t pid, uint64_t start, uint64_t end)
{
	struct gb_maps m;
	uint64_t brk = 0;
	if (gb_maps_read(pid, &m))
		return 0;
	gb_proc_stat_num(pid, 47, &brk);
	const uint64_t reach = 1ull << 30, size = GB_JIT_SIZE;
	uint64_t best = 0, bestd = UINT64_MAX;
	for (size_t k = 0; k <= m.n; k++) {
		uint64_t lo = k ? m.v[k - 1].end : 0x10000, hi = k < m.n ? m.v[k].start : 0x7ffffffff000ull;
		if (hi <= lo || hi - lo < size + 2 * GB_PAGE_SIZE)
			continue;
		bool heap = (brk && brk >= (k ? m.v[k - 1].start : 0) && brk <= hi) ||
			    (k && !strcmp(m.v[k - 1].path, "[heap]"));
		uint64_t a;
		if (hi <= start) {
			/* Below the range: its top is where the kernel puts the
			 * program's next mapping (top-down), so the cache goes as
			 * low as the reach allows (a program mapping less than
			 * ~1 GiB below the range gets the addresses it would get
			 * untraced). */
			a = start > reach ? (end - reach + 2 * GB_PAGE_SIZE) & ~(uint64_t)GB_PAGE_MASK : 0;
			if (a < lo + GB_PAGE_SIZE)
				a = lo + GB_PAGE_SIZE;
			if (a + size + GB_PAGE_SIZE > hi)
				continue;
		} else if (heap) {
			uint64_t top = start + reach - size - GB_PAGE_SIZE; /* (d < reach below) */
			a = hi - GB_PAGE_SIZE - size < top ? hi - GB_PAGE_SIZE - size : top & ~(uint64_t)GB_PAGE_MASK;
			if (a < lo + GB_PAGE_SIZE)
				continue;
		} else {
			/* the end of the hole nearest the range, a page off its neighbour */
			a = lo >= end ? lo + GB_PAGE_SIZE : hi - GB_PAGE_SIZE - size;
		}
		uint64_t d = a >= end ? a + size - start : end - a;
		if (d < reach && d < bestd) {
			best = a;
			bestd = d;
		}
	}
	gb_maps_free(&m);
	return best;
}

/* The call, injected in stopped thread tid.  stub: through the
 * self-restoring stub (ptrace/clonestub.h) where the vDSO has room for it,
 * so a worker SIGKILLed at any moment of it leaves the thread to finish the
 * call and go on where it was; elsewhere (and without stub) through syscall
 * stops, not single steps, so at least no trap flag is left behind once it
 * is done (docs/trace.md "Ending"). */
static int inject(pid_t pid, pid_t tid, bool stub, uint64_t insn, long nr, uint64_t a0,
		  uint64_t a1, uint64_t a2, uint64_t a3, long *ret, int *pending_sig)
{
	uint64_t args[6] = { a0, a1, a2, a3, (uint64_t)-1, 0 };
	int pend = 0, r = -ENOSPC;
	pid_t child;
	if (stub)
		r = gb_snap_stub_call(pid, tid, 0, nr, args, ret, &child, pending_sig);
	if (r == -ENOSPC) /* (nothing was injected) */
		r = gb_inject_syscall_nostep(tid, insn, nr, args, ret, &pend);
	if (pend && !*pending_sig) /* (kept for its next resume) */
		*pending_sig = pend;
	return r;
}

/* -v, when no hole was found: what lies within the reach of the range
 * (the mappings, adjacent ones of one file merged; at most 16 lines), the
 * program's brk, so that a layout the search does not expect (a runtime's
 * reservations near its executable) can be seen. */
static void say_layout(pid_t pid, uint64_t start, uint64_t end)
{
	struct gb_maps m;
	uint64_t brk = 0;
	const uint64_t reach = 1ull << 30;
	if (gb_maps_read(pid, &m))
		return;
	gb_proc_stat_num(pid, 47, &brk);
	gb_info("trace: pid %d: the mappings within 1 GiB of 0x%llx-0x%llx (brk starts at 0x%llx):",
		pid, (unsigned long long)start, (unsigned long long)end, (unsigned long long)brk);
	int said = 0;
	for (size_t k = 0; k < m.n && said < 16; k++) {
		uint64_t lo = m.v[k].start, hi = m.v[k].end;
		while (k + 1 < m.n && m.v[k + 1].start == hi && !strcmp(m.v[k + 1].path, m.v[k].path))
			hi = m.v[++k].end;
		if (hi + reach <= start || lo >= end + reach)
			continue;
		gb_info("trace:   0x%llx-0x%llx %llu KiB %s", (unsigned long long)lo,
			(unsigned long long)hi, (unsigned long long)((hi - lo) >> 10), m.v[k].path);
		said++;
	}
	gb_maps_free(&m);
}

static int map(pid_t pid, pid_t tid, bool stub, uint64_t start, uint64_t end,
	       const char *fallback, struct gb_jitmap *out, int *pending_sig)
{
	uint64_t insn = gb_inject_find_syscall(pid, NULL, NULL);
	uint64_t at = find_hole(pid, start, end);
	long ret;
	out->view = NULL;
	out->addr = 0;
	if (!insn) {
		gb_warn("trace: no system call instruction in pid %d's code to map a code cache "
			"with: %s", pid, fallback);
		return -ENOSPC;
	}
	if (!at) {
		gb_warn("trace: no room for a code cache near 0x%llx (no free %llu MiB within 1 GiB "
			"of the range; -v lists what is there): %s", (unsigned long long)start,
			(unsigned long long)(GB_JIT_SIZE >> 20), fallback);
		say_layout(pid, start, end);
		return -ENOSPC;
	}
	int r = inject(pid, tid, stub, insn, SYS_mmap, at, GB_JIT_SIZE, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, &ret, pending_sig);
	if (r || ret != (long)at) {
		if (!r && (unsigned long)ret < -4095UL) /* mapped, elsewhere (an old kernel) */
			inject(pid, tid, stub, insn, SYS_munmap, (uint64_t)ret, GB_JIT_SIZE, 0, 0, &ret, pending_sig);
		gb_warn("trace: cannot map a code cache in pid %d (%s): %s", pid,
			strerror(r ? -r : ret < 0 && ret > -4096 ? (int)-ret : EEXIST), fallback);
		return r ? r : -ENOMEM;
	}
	r = inject(pid, tid, stub, insn, SYS_mprotect, at, GB_JIT_CODE_SIZE, PROT_READ | PROT_EXEC, 0, &ret,
		   pending_sig);
	char path[96];
	snprintf(path, sizeof(path), "/proc/%d/map_files/%llx-%llx", pid,
		 (unsigned long long)(at + GB_JIT_CODE_SIZE), (unsigned long long)(at + GB_JIT_SIZE));
	int fd = r || ret ? -1 : open(path, O_RDWR | O_CLOEXEC);
	void *v = fd < 0 ? MAP_FAILED : mmap(NULL, GB_JIT_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fd >= 0)
		close(fd);
	if (v == MAP_FAILED) {
		gb_warn("trace: cannot share the code cache of pid %d (%s): %s", pid, strerror(errno),
			fallback);
		inject(pid, tid, stub, insn, SYS_munmap, at, GB_JIT_SIZE, 0, 0, &ret, pending_sig);
		return -EIO;
	}
	out->view = v;
	out->addr = at;
	gb_info("trace: code cache at 0x%llx-0x%llx", (unsigned long long)at,
		(unsigned long long)(at + GB_JIT_SIZE));
	return 0;
}

int gb_jitmap_map(pid_t pid, pid_t tid, uint64_t start, uint64_t end, const char *fallback,
		  struct gb_jitmap *out, int *pending_sig)
{
	return map(pid, tid, false, start, end, fallback, out, pending_sig);
}

int gb_jitmap_map_safe(pid_t pid, pid_t tid, uint64_t start, uint64_t end, const char *fallback,
		       struct gb_jitmap *out, int *pending_sig)
{
	return map(pid, tid, true, start, end, fallback, out, pending_sig);
}

static int unmap(pid_t pid, pid_t tid, bool stub, uint64_t addr, int *pending_sig)
{
	uint64_t insn = gb_inject_find_syscall(pid, NULL, NULL);
	long ret = -1;
	if (!insn)
		return -ENOENT;
	int r = inject(pid, tid, stub, insn, SYS_munmap, addr, GB_JIT_SIZE, 0, 0, &ret, pending_sig);
	return r ? r : ret ? (int)ret : 0;
}

int gb_jitmap_unmap_in(pid_t pid, pid_t tid, uint64_t addr, int *pending_sig)
{
	return unmap(pid, tid, false, addr, pending_sig);
}

int gb_jitmap_unmap_safe(pid_t pid, pid_t tid, uint64_t addr, int *pending_sig)
{
	return unmap(pid, tid, true, addr, pending_sig);
}

void gb_jitmap_drop(struct gb_jitmap *m)
{
	if (m->view)
		munmap(m->view, GB_JIT_SIZE);
	m->view = NULL;
	m->addr = 0;
}
