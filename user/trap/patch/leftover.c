/* What an earlier gebpf left in a target: see trap/patch/leftover.h. */
#include "trap/patch/leftover.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/user.h>
#include <unistd.h>

#include "common/log.h"
#include "common/page.h"
#include "jit/patch.h"
#include "ptrace/maps.h"
#include "ptrace/mem.h"
#include "ptrace/regs.h"

static bool shared_anon(const struct gb_map *m)
{
	return m->perms[3] == 's' && !strncmp(m->path, "/dev/zero", 9);
}

/* A thread blocked in a system call of a cache of this version stands at
 * the liveness test after it (movzx ecx, byte [rip+d32] on the gone byte:
 * jit/lock.c's ns_syscall), which sends it to the original code without
 * touching the cache's state: not inside. */
static bool at_way_out(pid_t pid, const struct gb_leftover *c, uint64_t rip)
{
	uint8_t b[7];
	int32_t d;
	if (!c->known || gb_mem_read(pid, rip, b, sizeof(b)) != (ssize_t)sizeof(b) ||
	    b[0] != 0x0f || b[1] != 0xb6 || b[2] != 0x0d)
		return false;
	memcpy(&d, b + 3, 4);
	return rip + 7 + (uint64_t)(int64_t)d == c->data + c->hdr.gone_off;
}

const struct gb_leftover *gb_leftovers_at(const struct gb_leftovers *l, uint64_t addr)
{
	for (size_t k = 0; k < l->n; k++)
		if (addr >= l->v[k].code && addr < l->v[k].end)
			return &l->v[k];
	return NULL;
}

static void count_inside(pid_t pid, struct gb_leftovers *l)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	DIR *d = opendir(path);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		struct user_regs_struct r;
		pid_t tid = atoi(de->d_name);
		if (tid <= 0 || gb_regs_get(tid, &r))
			continue;
		struct gb_leftover *c = (struct gb_leftover *)gb_leftovers_at(l, r.rip);
		if (c && r.rip < c->data && !at_way_out(pid, c, r.rip))
			c->inside++;
	}
	if (d)
		closedir(d);
}

int gb_leftovers_find(pid_t pid, struct gb_leftovers *out)
{
	struct gb_maps m;
	out->n = 0;
	if (gb_maps_read(pid, &m))
		return -1;
	for (size_t k = 0; k + 1 < m.n && out->n < GB_LEFTOVER_MAX; k++) {
		const struct gb_map *a = &m.v[k], *b = &m.v[k + 1];
		if (!shared_anon(a) || !shared_anon(b) || strcmp(a->perms, "r-xs") ||
		    strcmp(b->perms, "rw-s") || a->inode != b->inode || a->end != b->start ||
		    a->end - a->start != GB_JIT_CODE_SIZE || b->end - b->start != GB_JIT_DATA_SIZE)
			continue;
		struct gb_leftover *c = &out->v[out->n++];
		memset(c, 0, sizeof(*c));
		c->code = a->start;
		c->data = b->start;
		c->end = b->end;
		c->known = gb_mem_read(pid, c->data + GB_JIT_HDR_OFF, &c->hdr, sizeof(c->hdr)) ==
				   (ssize_t)sizeof(c->hdr) &&
			   gb_jit__hdr_ok(&c->hdr) && c->hdr.code_addr == c->code;
	}
	gb_maps_free(&m);
	if (out->n)
		count_inside(pid, out);
	return 0;
}

/* The pages of map mp that are the process's own copy (written to: not
 * the file's page cache), from /proc/PID/pagemap: bit 63 present, 62
 * swapped, 61 a file page (or shared anonymous). */
static bool own_copy(int pagemap, uint64_t page)
{
	uint64_t e;
	if (pread(pagemap, &e, 8, (off_t)(page / GB_PAGE_SIZE * 8)) != 8)
		return true; /* (unknown: compared) */
	return (e >> 62 & 1) || ((e >> 63 & 1) && !(e >> 61 & 1));
}

/* The trampoline at t (a jmp rel32 into a cache, in the nops before an
 * entry: jit/patch.h) written back: the 2-byte jump to it from its entry,
 * within GB_PATCH_PAD_MAX bytes after it, written back too (else the
 * entry would jump into nops that lead back to it).  The places written,
 * or -1 (said). */
static int restore_short(pid_t pid, int fd, const struct gb_map *mp, uint64_t t)
{
	uint8_t mem[GB_PATCH_PAD_MAX + 8], file[GB_PATCH_PAD_MAX + 8];
	uint64_t lo = t + GB_PATCH_LEN, hi = t + GB_PATCH_PAD_MAX + 8;
	if (hi > mp->end)
		hi = mp->end;
	if (lo >= hi)
		return 0;
	size_t n = (size_t)(hi - lo);
	ssize_t got = pread(fd, file, n, (off_t)(mp->offset + (lo - mp->start)));
	if (gb_mem_read(pid, lo, mem, n) != (ssize_t)n || got != (ssize_t)n)
		return 0;
	int found = 0;
	for (size_t i = 0; i + 2 <= n; i++) {
		uint64_t at = lo + i;
		if (mem[i] != 0xeb || !memcmp(mem + i, file + i, 2) ||
		    at + 2 + (uint64_t)(int64_t)(int8_t)mem[i + 1] != t)
			continue;
		if (gb_mem_write(pid, at, file + i, 2) != 2) {
			gb_err("trace: pid %d: 0x%llx (%s) jumps to a trampoline an earlier gebpf left at "
			       "0x%llx and cannot be written back: %s", pid, (unsigned long long)at,
			       mp->path, (unsigned long long)t, strerror(errno));
			return -1;
		}
		found++;
	}
	return found;
}

/* Every jump into a cache of l on the own-copy pages of file map mp,
 * written back with the file's bytes: the places found, or -1 (said). */
static int restore_map(pid_t pid, int pagemap, const struct gb_map *mp, struct gb_leftovers *l)
{
	char path[128];
	snprintf(path, sizeof(path), "/proc/%d/map_files/%llx-%llx", pid, (unsigned long long)mp->start,
		 (unsigned long long)mp->end);
	int fd = -1, found = 0;
	static uint8_t mem[GB_PAGE_SIZE + 4], file[GB_PAGE_SIZE + 4];
	for (uint64_t pg = mp->start; pg < mp->end; pg += GB_PAGE_SIZE) {
		if (!own_copy(pagemap, pg))
			continue;
		size_t n = mp->end - pg >= GB_PAGE_SIZE + 4 ? GB_PAGE_SIZE + 4 : (size_t)(mp->end - pg);
		if (gb_mem_read(pid, pg, mem, n) != (ssize_t)n)
			continue; /* (not readable: nothing to compare) */
		if (fd < 0 && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
			gb_err("trace: pid %d: its code at 0x%llx (%s) was changed and its file cannot be "
			       "read to compare: %s", pid, (unsigned long long)pg, mp->path, strerror(errno));
			return -1;
		}
		ssize_t got = pread(fd, file, n, (off_t)(mp->offset + (pg - mp->start)));
		for (size_t i = 0; i < GB_PAGE_SIZE && i + 5 <= n; i++) {
			if (mem[i] != 0xe9 || (ssize_t)(i + 5) > got || !memcmp(mem + i, file + i, 5))
				continue;
			int32_t rel;
			memcpy(&rel, mem + i + 1, 4);
			uint64_t at = pg + i, to = at + 5 + (uint64_t)(int64_t)rel;
			struct gb_leftover *c = (struct gb_leftover *)gb_leftovers_at(l, to);
			if (!c || to >= c->data)
				continue;
			if (gb_mem_write(pid, at, file + i, 5) != 5) {
				gb_err("trace: pid %d: 0x%llx (%s) jumps into a code cache an earlier gebpf "
				       "left at 0x%llx and cannot be written back: %s", pid,
				       (unsigned long long)at, mp->path, (unsigned long long)c->code,
				       strerror(errno));
				close(fd);
				return -1;
			}
			memcpy(mem + i, file + i, 5);
			c->restored++;
			found++;
			int s = restore_short(pid, fd, mp, at);
			if (s < 0) {
				close(fd);
				return -1;
			}
			found += s;
			c->restored += (unsigned)s;
			i += 4;
		}
	}
	if (fd >= 0)
		close(fd);
	return found;
}

/* Marked gone (jit/live.c): a thread still in it stops waiting for a gebpf
 * that is not there; its ring's pages given back (shmem: MADV_REMOVE through
 * a mapping of the same object). */
static void retire(pid_t pid, const struct gb_leftover *c)
{
	uint32_t gone = GB_JIT_LIVE_GONE;
	if (c->known)
		gb_mem_write(pid, c->data + c->hdr.gone_off - 3, &gone, sizeof(gone));
	char path[128];
	snprintf(path, sizeof(path), "/proc/%d/map_files/%llx-%llx", pid, (unsigned long long)c->data,
		 (unsigned long long)c->end);
	int fd = c->known ? open(path, O_RDWR | O_CLOEXEC) : -1;
	void *v = fd < 0 ? MAP_FAILED : mmap(NULL, GB_JIT_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fd >= 0)
		close(fd);
	if (v == MAP_FAILED)
		return;
	madvise((uint8_t *)v + GB_JIT_CODE_SIZE + GB_JIT_DATA_SLOTS, GB_JIT_RING_SIZE, MADV_REMOVE);
	munmap(v, GB_JIT_SIZE);
}

int gb_leftovers_take(pid_t pid, struct gb_leftovers *l)
{
	if (gb_leftovers_find(pid, l) || !l->n)
		return 0;
	struct gb_maps m;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	int pm = open(path, O_RDONLY | O_CLOEXEC);
	if (gb_maps_read(pid, &m)) {
		if (pm >= 0)
			close(pm);
		return 0; /* (gone) */
	}
	int rc = 0;
	for (size_t k = 0; k < m.n && !rc; k++) {
		const struct gb_map *mp = &m.v[k];
		if ((mp->prot & PROT_EXEC) && mp->path[0] == '/' && mp->inode && !shared_anon(mp) &&
		    restore_map(pid, pm, mp, l) < 0)
			rc = -1;
	}
	gb_maps_free(&m);
	if (pm >= 0)
		close(pm);
	for (size_t k = 0; k < l->n; k++) {
		const struct gb_leftover *c = &l->v[k];
		retire(pid, c);
		if (c->known)
			gb_info("trace: pid %d: a code cache gebpf %d left at 0x%llx-0x%llx (range "
				"0x%llx-0x%llx of %s): marked gone, its ring's memory given back, %u "
				"patched places written back from their files, %u threads inside it",
				pid, c->hdr.worker, (unsigned long long)c->code, (unsigned long long)c->end,
				(unsigned long long)c->hdr.start, (unsigned long long)c->hdr.end,
				c->hdr.module, c->restored, c->inside);
		else
			gb_info("trace: pid %d: a mapping shaped like a code cache of another gebpf "
				"version at 0x%llx-0x%llx: %u jumps into it written back from their files, "
				"%u threads inside it", pid, (unsigned long long)c->code,
				(unsigned long long)c->end, c->restored, c->inside);
	}
	return rc;
}
