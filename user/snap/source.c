/* A capture's memory source (source.h). */
#include "snap/source.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_RUNS 1024
#define PM_PRESENT (1ull << 63)
#define PM_SWAPPED (1ull << 62)
#define PM_CHUNK 4096   /* pagemap entries per read */

struct gb_snap_src {
	pid_t pid, child;
	int mem_fd, pagemap_fd, spill_fd;
	uint64_t spill_len;
};

static void open_proc(struct gb_snap_src *src)
{
	char path[64];
	if (src->mem_fd >= 0)
		close(src->mem_fd);
	if (src->pagemap_fd >= 0)
		close(src->pagemap_fd);
	snprintf(path, sizeof(path), "/proc/%d/mem", src->pid);
	src->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/pagemap", src->pid);
	src->pagemap_fd = open(path, O_RDONLY | O_CLOEXEC);
}

struct gb_snap_src *gb_snap_src__new(pid_t pid)
{
	struct gb_snap_src *src = calloc(1, sizeof(*src));
	if (!src)
		return NULL;
	src->pid = pid;
	src->mem_fd = src->pagemap_fd = src->spill_fd = -1;
	open_proc(src);
	return src;
}

int gb_snap_src__set_child(struct gb_snap_src *src, pid_t child)
{
	src->child = src->pid = child;
	open_proc(src);
	return src->mem_fd < 0 ? -errno : 0;
}

pid_t gb_snap_src__child(const struct gb_snap_src *src)
{
	return src ? src->child : 0;
}

void gb_snap_src__free(struct gb_snap_src *src)
{
	if (!src)
		return;
	if (src->mem_fd >= 0)
		close(src->mem_fd);
	if (src->pagemap_fd >= 0)
		close(src->pagemap_fd);
	if (src->spill_fd >= 0)
		close(src->spill_fd);
	if (src->child > 0) {
		/* We trace it: this wait reaps it (fully when we are its parent). */
		kill(src->child, SIGKILL);
		int st;
		while (waitpid(src->child, &st, __WALL) == src->child && !WIFEXITED(st) && !WIFSIGNALED(st))
			;
	}
	free(src);
}

/* One run of pages that exist, relative to the map. */
struct run {
	uint64_t off, len;
};

/* Runs of existing pages of [off, off + len) of m (at most cap); *next is
 * where the scan stopped.  -1 when pagemap cannot be read. */
static int present_runs(struct gb_snap_src *src, const struct gb_snap_map *m, uint64_t off, uint64_t len,
			struct run *runs, size_t cap, size_t *n, uint64_t *next)
{
	uint64_t ent[PM_CHUNK];
	*n = 0;
	for (uint64_t o = off; o < off + len;) {
		uint64_t k = (off + len - o) / GB_PAGE_SIZE;
		if (k > PM_CHUNK)
			k = PM_CHUNK;
		ssize_t r = pread(src->pagemap_fd, ent, k * 8, (off_t)((m->start + o) / GB_PAGE_SIZE * 8));
		if (r != (ssize_t)(k * 8))
			return -1;
		for (uint64_t q = 0; q < k; q++, o += GB_PAGE_SIZE) {
			if (!(ent[q] & (PM_PRESENT | PM_SWAPPED)))
				continue;
			if (*n && runs[*n - 1].off + runs[*n - 1].len == o) {
				runs[*n - 1].len += GB_PAGE_SIZE;
			} else if (*n == cap) {
				*next = o;
				return 0;
			} else {
				runs[(*n)++] = (struct run){ o, GB_PAGE_SIZE };
			}
		}
	}
	*next = off + len;
	return 0;
}

/* Read the runs into buf (buf[0] is map offset base) with pread on
 * /proc/PID/mem, as gdb does: process_vm_readv pins the pages, and pinning a
 * page the copy shares copy-on-write with the target makes the kernel copy
 * it (the copy would end up owning a private copy of all its memory).
 * Unreadable pages are zeroed and counted.  Pages read, or -ESRCH. */
static int64_t read_runs(struct gb_snap_src *src, const struct gb_snap_map *m, uint64_t base, uint8_t *buf,
			 const struct run *runs, size_t nruns, uint64_t *failed)
{
	int64_t got = 0;
	for (size_t i = 0; i < nruns; i++) {
		uint64_t o = runs[i].off, end = runs[i].off + runs[i].len;
		while (o < end) {
			ssize_t r = src->mem_fd >= 0 ?
				pread(src->mem_fd, buf + (o - base), end - o, (off_t)(m->start + o)) : -1;
			if (r < 0 && errno == EINTR)
				continue;
			if (r > 0) {
				uint64_t done = (uint64_t)r & ~(GB_PAGE_SIZE - 1);
				if (done) {
					got += (int64_t)(done / GB_PAGE_SIZE);
					o += done;
					continue;
				}
			}
			/* 0 bytes: the address space is gone (a dead page gives EIO). */
			if (r == 0)
				return -ESRCH;
			/* The page at o cannot be read. */
			memset(buf + (o - base), 0, GB_PAGE_SIZE);
			(*failed)++;
			o += GB_PAGE_SIZE;
		}
	}
	return got;
}

int64_t gb_snap_src__read(struct gb_snap_src *src, const struct gb_snap_map *m, uint64_t off,
			  uint8_t *buf, uint64_t len, bool *holes, uint64_t *failed)
{
	*holes = false;
	if (m->spilled) {
		for (uint64_t d = 0; d < len;) {
			ssize_t r = pread(src->spill_fd, buf + d, len - d, (off_t)(m->spill_off + off + d));
			if (r <= 0)
				return r < 0 ? -errno : -EIO;
			d += (uint64_t)r;
		}
		return (int64_t)(len / GB_PAGE_SIZE);
	}
	if (!m->sparse || src->pagemap_fd < 0) {
		struct run whole = { off, len };
		return read_runs(src, m, off, buf, &whole, 1, failed);
	}
	struct run runs[MAX_RUNS];
	int64_t got = 0;
	uint64_t o = off, zeroed = off; /* buf is zero up to zeroed */
	while (o < off + len) {
		size_t n;
		uint64_t next;
		if (present_runs(src, m, o, off + len - o, runs, MAX_RUNS, &n, &next)) {
			struct run rest = { o, off + len - o };
			runs[0] = rest;
			n = 1;
			next = off + len;
		}
		if (!n && o == off && next == off + len) {
			*holes = true;
			return 0;
		}
		for (size_t i = 0; i < n; i++) {
			memset(buf + (zeroed - off), 0, runs[i].off - zeroed);
			zeroed = runs[i].off + runs[i].len;
		}
		int64_t r = read_runs(src, m, off, buf, runs, n, failed);
		if (r < 0)
			return r;
		got += r;
		o = next;
	}
	memset(buf + (zeroed - off), 0, off + len - zeroed);
	return got;
}

static int open_spill(struct gb_snap_src *src, const char *dir)
{
	src->spill_fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (src->spill_fd >= 0)
		return 0;
	char *tmp;
	if (asprintf(&tmp, "%s/.gebpf-scratch.XXXXXX", dir) < 0)
		return -ENOMEM;
	src->spill_fd = mkostemp(tmp, O_CLOEXEC);
	int e = errno;
	if (src->spill_fd >= 0)
		unlink(tmp);
	free(tmp);
	return src->spill_fd >= 0 ? 0 : -e;
}

int gb_snap_src__spill(struct gb_snap_src *src, struct gb_snap_map *m, const char *dir, uint8_t *buf,
		       uint64_t buflen)
{
	int r;
	if (src->spill_fd < 0 && (r = open_spill(src, dir ? dir : ".")))
		return r;
	uint64_t size = m->end - m->start, failed = 0;
	int64_t got = 0;
	for (uint64_t o = 0; o < size; o += buflen) {
		uint64_t len = size - o < buflen ? size - o : buflen;
		bool holes;
		int64_t n = gb_snap_src__read(src, m, o, buf, len, &holes, &failed);
		if (n < 0)
			return (int)n;
		got += n;
		for (uint64_t p = 0; p < len && !holes; p += GB_PAGE_SIZE) {
			if (gb_page_is_zero(buf + p))
				continue;
			uint64_t q = p + GB_PAGE_SIZE;
			while (q < len && !gb_page_is_zero(buf + q))
				q += GB_PAGE_SIZE;
			for (uint64_t d = p; d < q;) {
				ssize_t w = pwrite(src->spill_fd, buf + d, q - d, (off_t)(src->spill_len + o + d));
				if (w < 0)
					return -errno;
				d += (uint64_t)w;
			}
			p = q;
		}
	}
	/* Zero pages were not written: the file must still reach the end. */
	if (ftruncate(src->spill_fd, (off_t)(src->spill_len + size)))
		return -errno;
	m->failed = failed;
	m->spilled = true;
	m->spill_off = src->spill_len;
	src->spill_len += size;
	if (got == 0 && !m->sparse)
		m->live = false; /* nothing readable: listed with no bytes */
	return 0;
}
