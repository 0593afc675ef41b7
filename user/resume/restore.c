/* Recreate a snapshot's process: see resume.h and docs/resume.md. */
#include "resume/resume.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "ptrace/inject.h"
#include "ptrace/maps.h"
#include "ptrace/mem.h"
#include "ptrace/procfs.h"
#include "ptrace/regs.h"
#include "resume/resume_int.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* The kernel's own mappings, kept from the helper (never unmapped). */
static bool is_special(const char *path)
{
	return !strcmp(path, "[vdso]") || !strcmp(path, "[vvar]") || !strcmp(path, "[vvar_vclock]") ||
	       !strcmp(path, "[vsyscall]");
}

static int perms_prot(const char *perms)
{
	return (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
	       (perms[2] == 'x' ? PROT_EXEC : 0);
}

static const struct gb_snap_map *snap_map_named(const struct gb_snapshot *s, const char *path)
{
	for (size_t i = 0; i < s->nmaps; i++)
		if (!strcmp(s->maps[i].path, path))
			return &s->maps[i];
	return NULL;
}

static bool overlaps_snapshot(const struct gb_snapshot *s, uint64_t a, uint64_t b)
{
	for (size_t i = 0; i < s->nmaps; i++)
		if (s->maps[i].start < b && a < s->maps[i].end)
			return true;
	return false;
}

/* Unmap everything of the helper but the kernel's mappings. */
static int unmap_helper(struct gb_rctx *c)
{
	struct gb_maps m;
	int e = gb_maps_read(c->pid, &m);
	if (e)
		return gb_resume__fail(c, e, "read the helper's maps: %s", strerror(-e));
	for (size_t i = 0; i < m.n && !e; i++) {
		if (is_special(m.v[i].path))
			continue;
		long r = gb_rsys(c, SYS_munmap, m.v[i].start, m.v[i].end - m.v[i].start, 0, 0, 0, 0);
		if (r < 0)
			e = gb_resume__fail(c, (int)r, "munmap 0x%llx: %s", (unsigned long long)m.v[i].start,
				 strerror((int)-r));
	}
	gb_maps_free(&m);
	return e;
}

/* Move the helper's vDSO (with its vvar pages, at the same distance) to the
 * snapshot's address when this kernel's layout is the snapshot's; keep it
 * where it is, with a warning, when the layouts differ. */
static int place_vdso(struct gb_rctx *c, const struct gb_snapshot *s)
{
	const struct gb_snap_map *sv = snap_map_named(s, "[vdso]");
	struct gb_maps m;
	int e = gb_maps_read(c->pid, &m);
	if (e)
		return gb_resume__fail(c, e, "read the helper's maps: %s", strerror(-e));
	const struct gb_map *hv = NULL;
	for (size_t i = 0; i < m.n; i++)
		if (!strcmp(m.v[i].path, "[vdso]"))
			hv = &m.v[i];
	if (!sv || !hv || sv->start == hv->start)
		goto out;
	int64_t delta = (int64_t)(sv->start - hv->start);
	bool same = true;
	for (size_t i = 0; i < m.n; i++) {
		if (!is_special(m.v[i].path) || !strcmp(m.v[i].path, "[vsyscall]"))
			continue;
		const struct gb_snap_map *sm = snap_map_named(s, m.v[i].path);
		if (!sm || sm->start != m.v[i].start + (uint64_t)delta ||
		    sm->end - sm->start != m.v[i].end - m.v[i].start)
			same = false;
	}
	if (!same) {
		gb_warn("resume: the snapshot's vDSO (0x%llx) is laid out unlike this kernel's: keeping "
			"this kernel's at 0x%llx (code that calls the old one will fault)",
			(unsigned long long)sv->start, (unsigned long long)hv->start);
		for (size_t i = 0; i < m.n && !e; i++)
			if (is_special(m.v[i].path) && overlaps_snapshot(s, m.v[i].start, m.v[i].end))
				e = gb_resume__fail(c, -EEXIST, "this kernel's %s at 0x%llx overlaps the snapshot's memory",
					 m.v[i].path, (unsigned long long)m.v[i].start);
		goto out;
	}
	for (size_t i = 0; i < m.n && !e; i++) {
		if (!is_special(m.v[i].path) || !strcmp(m.v[i].path, "[vsyscall]"))
			continue;
		uint64_t len = m.v[i].end - m.v[i].start;
		long r = gb_rsys(c, SYS_mremap, m.v[i].start, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
				 m.v[i].start + (uint64_t)delta, 0);
		if (r < 0)
			e = gb_resume__fail(c, (int)r, "move %s to 0x%llx: %s", m.v[i].path,
				 (unsigned long long)(m.v[i].start + (uint64_t)delta), strerror((int)-r));
	}
	if (!e) {
		c->insn = gb_inject_find_syscall(c->pid, 0, 0);
		if (!c->insn)
			e = gb_resume__fail(c, -ENOENT, "no syscall instruction in the moved vDSO");
	}
out:
	gb_maps_free(&m);
	return e;
}

/* A scratch area where neither the snapshot nor the kernel maps anything. */
static int map_scratch(struct gb_rctx *c, const struct gb_snapshot *s)
{
	struct gb_maps m;
	int e = gb_maps_read(c->pid, &m);
	if (e)
		return gb_resume__fail(c, e, "read the helper's maps: %s", strerror(-e));
	for (uint64_t a = 0x10000000ull; a < 0x7f0000000000ull; a += 0x10000000ull) {
		uint64_t b = a + GB_RSCRATCH_LEN;
		bool busy = overlaps_snapshot(s, a, b);
		for (size_t i = 0; i < m.n && !busy; i++)
			busy = m.v[i].start < b && a < m.v[i].end;
		if (busy)
			continue;
		long r = gb_rsys(c, SYS_mmap, a, GB_RSCRATCH_LEN, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, (uint64_t)-1, 0);
		if (r == (long)a) {
			c->scratch = a;
			break;
		}
	}
	gb_maps_free(&m);
	return c->scratch ? 0 : gb_resume__fail(c, -ENOMEM, "no room for a scratch area in the helper");
}

/* Whether map m can come from its file: the file has exactly its bytes
 * (or the map has none). */
static bool file_unchanged(const struct gb_snap_map *m)
{
	if (m->path[0] != '/' || strstr(m->path, " (deleted)"))
		return false;
	int fd = open(m->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct stat st;
	uint64_t len = m->end - m->start;
	bool same = !fstat(fd, &st) && S_ISREG(st.st_mode) &&
		    (uint64_t)st.st_size + GB_PAGE_SIZE > m->pgoff + len; /* no page past EOF */
	if (same && m->data) {
		uint8_t *buf = calloc(1, (size_t)len);
		same = buf && pread(fd, buf, (size_t)len, (off_t)m->pgoff) >= 0 &&
		       memcmp(buf, m->data, (size_t)len) == 0;
		free(buf);
	}
	close(fd);
	return same;
}

static int write_bytes(struct gb_rctx *c, const struct gb_snap_map *m)
{
	uint64_t len = m->end - m->start;
	for (uint64_t off = 0; off < len; off += GB_PAGE_SIZE) {
		uint64_t run = off;
		while (run < len && !gb_page_is_zero(m->data + run)) /* a run of non-zero pages */
			run += GB_PAGE_SIZE;
		if (run > off) {
			ssize_t n = gb_mem_write(c->pid, m->start + off, m->data + off, (size_t)(run - off));
			if (n != (ssize_t)(run - off))
				return gb_resume__fail(c, n < 0 ? (int)n : -EIO, "write 0x%llx: %s",
					    (unsigned long long)(m->start + off),
					    strerror(n < 0 ? (int)-n : EIO));
			off = run;
		}
	}
	return 0;
}

static int map_one(struct gb_rctx *c, const struct gb_snap_map *m)
{
	uint64_t len = m->end - m->start;
	int prot = perms_prot(m->perms);
	bool shared = m->perms[3] == 's';
	bool from_file = file_unchanged(m);
	long r;
	if (shared && m->path[0] == '/' && !from_file && !strstr(m->path, " (deleted)") &&
	    access(m->path, F_OK) == 0) {
		gb_warn("resume: %s at 0x%llx: shared mapping whose file changed: mapped from the file",
			m->path, (unsigned long long)m->start);
		from_file = true;
	}
	if (from_file) {
		uint64_t path = gb_rput(c, 0, m->path, strlen(m->path) + 1);
		int oflags = (shared && (prot & PROT_WRITE)) ? O_RDWR : O_RDONLY;
		long fd = path ? gb_rsys(c, SYS_openat, (uint64_t)AT_FDCWD, path, (uint64_t)oflags, 0, 0, 0)
			       : -EFAULT;
		if (fd < 0)
			return gb_resume__fail(c, (int)fd, "%s: open in the new process: %s", m->path, strerror((int)-fd));
		r = gb_rsys(c, SYS_mmap, m->start, len, (uint64_t)prot,
			    MAP_FIXED | (shared ? MAP_SHARED : MAP_PRIVATE), (uint64_t)fd, m->pgoff);
		gb_rsys(c, SYS_close, (uint64_t)fd, 0, 0, 0, 0, 0);
	} else {
		int flags = MAP_FIXED | MAP_ANONYMOUS | (shared ? MAP_SHARED : MAP_PRIVATE);
		if (!strcmp(m->path, "[stack]"))
			flags |= MAP_GROWSDOWN;
		r = gb_rsys(c, SYS_mmap, m->start, len, (uint64_t)prot, (uint64_t)flags, (uint64_t)-1, 0);
	}
	if (r != (long)m->start)
		return gb_resume__fail(c, r < 0 ? (int)r : -EFAULT, "map 0x%llx-0x%llx %s %s: %s",
			    (unsigned long long)m->start, (unsigned long long)m->end, m->perms,
			    m->path[0] ? m->path : "(anonymous)", r < 0 ? strerror((int)-r) : "moved");
	return (!from_file && m->data) ? write_bytes(c, m) : 0;
}

/* The helper's mm fields from /proc/PID/stat (fields 26-28 and 45-51). */
static int read_mm(pid_t pid, struct prctl_mm_map *mm)
{
	uint64_t f[52];
	if (gb_proc_stat_nums(pid, f, 51))
		return -EIO;
	mm->start_code = f[26];
	mm->end_code = f[27];
	mm->start_stack = f[28];
	mm->start_data = f[45];
	mm->end_data = f[46];
	mm->start_brk = mm->brk = f[47];
	mm->arg_start = f[48];
	mm->arg_end = f[49];
	mm->env_start = f[50];
	mm->env_end = f[51];
	return 0;
}

/* brk from the [heap] mapping, the stack start inside [stack], auxv (one
 * prctl PR_SET_MM_MAP: unlike the single PR_SET_MM fields it needs no
 * CAP_SYS_RESOURCE), and the thread's name. */
static int set_mm_fields(struct gb_rctx *c, const struct gb_snapshot *s)
{
	const struct gb_snap_map *heap = snap_map_named(s, "[heap]");
	const struct gb_snap_map *stack = snap_map_named(s, "[stack]");
	struct prctl_mm_map mm;
	memset(&mm, 0, sizeof(mm));
	if (read_mm(c->pid, &mm))
		return gb_resume__fail(c, -EIO, "read the new process's /proc/%d/stat", c->pid);
	mm.exe_fd = (uint32_t)-1;
	if (heap) {
		mm.start_brk = heap->start;
		mm.brk = heap->end;
	}
	if (stack && (mm.start_stack < stack->start || mm.start_stack >= stack->end))
		mm.start_stack = stack->end - 8;
	if (s->auxv_len) {
		mm.auxv = (__u64 *)(uintptr_t)gb_rput(c, 1024, s->auxv, s->auxv_len);
		mm.auxv_size = (uint32_t)s->auxv_len;
		if (!mm.auxv)
			return gb_resume__fail(c, -EFAULT, "auxv: cannot write it into the new process");
	}
	uint64_t a = gb_rput(c, 0, &mm, sizeof(mm));
	long r = a ? gb_rsys(c, SYS_prctl, PR_SET_MM, PR_SET_MM_MAP, a, sizeof(mm), 0, 0) : -EFAULT;
	if (r < 0)
		return gb_resume__fail(c, (int)r, "prctl PR_SET_MM_MAP (brk 0x%llx-0x%llx, auxv): %s",
			    (unsigned long long)mm.start_brk, (unsigned long long)mm.brk, strerror((int)-r));
	char name[17] = { 0 };
	memcpy(name, s->ps.fname, sizeof(s->ps.fname));
	a = gb_rput(c, 0, name, sizeof(name));
	if (a && name[0])
		gb_rsys(c, SYS_prctl, PR_SET_NAME, a, 0, 0, 0, 0);
	return 0;
}

static const char *helper_exe(const struct gb_snapshot *s)
{
	struct stat st;
	if (s->exe && s->exe[0] == '/' && !stat(s->exe, &st) && S_ISREG(st.st_mode) &&
	    access(s->exe, X_OK) == 0)
		return s->exe;
	gb_warn("resume: %s: not found; the new process runs in gebpf's executable file "
		"(/proc/PID/exe names it)", s->exe ? s->exe : "(no executable recorded)");
	return "/proc/self/exe";
}

int gb_resume_restore(const struct gb_snapshot *s, struct gb_tracee *t, const char *what,
		      const struct gb_restore_opts *o)
{
	static const struct gb_restore_opts none;
	o = o ? o : &none;
	bool new_pidns = o->new_pidns;
	struct gb_rctx c = { .what = what, .snap = s, .ns = new_pidns, .choice = o->fds,
			     .nchoice = o->nfds };
	if (!s->nthreads)
		return gb_resume__fail(&c, -EINVAL, "the snapshot has no thread");
	for (size_t i = 0; i < o->nfds; i++) {
		bool have = false;
		for (size_t j = 0; j < s->nfds; j++)
			have |= s->fds[j].fd == o->fds[i].fd;
		if (!have || o->fds[i].fd <= 2)
			return gb_resume__fail(&c, -EINVAL, "--fd %d: %s", o->fds[i].fd, o->fds[i].fd <= 2 ?
					       "0, 1 and 2 are gebpf's caller's" :
					       "the snapshot has no such fd");
	}
	if (new_pidns && s->meta.pid <= 1)
		return gb_resume__fail(&c, -EINVAL, "--new-pidns: pid %d cannot be kept (the new "
				       "namespace's init is gebpf's)", (int)s->meta.pid);
	const char *exe = helper_exe(s);
	char *argv[] = { (char *)exe, NULL };
	struct gb_launch_opts lo = { .argv = argv, .ns_pid = new_pidns ? s->meta.pid : 0 };
	if (gb_tracee_launch(&lo, t))
		return gb_resume__fail(&c, -ECHILD, "cannot start a process to restore into");
	c.pid = t->pid;
	int e = 0;
	c.insn = gb_inject_find_syscall(c.pid, 0, 0);
	if (!c.insn)
		e = gb_resume__fail(&c, -ENOENT, "no syscall instruction in the new process's vDSO");
	if (!e)
		e = unmap_helper(&c);
	if (!e)
		e = place_vdso(&c, s);
	if (!e)
		e = map_scratch(&c, s);
	for (size_t i = 0; i < s->nmaps && !e; i++)
		if (!is_special(s->maps[i].path))
			e = map_one(&c, &s->maps[i]);
	if (!e)
		e = set_mm_fields(&c, s);
	if (!e)
		e = gb_resume__fds(&c, s);
	if (!e)
		e = gb_resume__proc(&c, s);
	if (!e)
		e = gb_resume__threads(&c, t, s);
	if (!e)
		e = gb_resume__timers(&c, s);
	if (!e)
		e = gb_resume__pending(&c, t, s);
	if (!e) {
		gb_rsys(&c, SYS_munmap, c.scratch, GB_RSCRATCH_LEN, 0, 0, 0, 0);
		e = gb_resume__cpus(&c, t, s);
	}
	if (!e)
		gb_resume__limits(&c, s);
	if (e)
		gb_tracee_kill(t);
	return e;
}
