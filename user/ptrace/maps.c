#include "ptrace/maps.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/bound.h"
#include "common/grow.h"

int gb_maps_read(pid_t pid, struct gb_maps *out)
{
	char path[64], line[4096 + 256];
	out->v = NULL;
	out->n = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	size_t cap = 0;
	while (fgets(line, sizeof(line), f)) {
		struct gb_map m;
		int pos = 0;
		memset(&m, 0, sizeof(m));
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 " %n",
			   &m.start, &m.end, m.perms, &m.offset, &m.dev_major, &m.dev_minor,
			   &m.inode, &pos) < 7)
			continue;
		const char *p = line + pos;
		size_t l = strcspn(p, "\n");
		if (l >= sizeof(m.path))
			l = sizeof(m.path) - 1;
		memcpy(m.path, p, l);
		m.path[l] = 0;
		m.prot = (m.perms[0] == 'r' ? PROT_READ : 0) | (m.perms[1] == 'w' ? PROT_WRITE : 0) |
			 (m.perms[2] == 'x' ? PROT_EXEC : 0);
		if (GB_GROW(&out->v, &cap, out->n + 1)) {
			fclose(f);
			gb_maps_free(out);
			return -ENOMEM;
		}
		out->v[out->n++] = m;
	}
	fclose(f);
	return out->n ? 0 : -ESRCH;
}

void gb_maps_free(struct gb_maps *m)
{
	free(m->v);
	m->v = NULL;
	m->n = 0;
}

const struct gb_map *gb_maps_find(const struct gb_maps *m, uint64_t addr)
{
	size_t i = GB_UPPER(m->v, m->n, start, addr);
	return i && addr < m->v[i - 1].end ? &m->v[i - 1] : NULL;
}

/* uapi/linux/fs.h of Linux 6.11 (Debian 12's headers predate it). */
#ifndef PROCMAP_QUERY
struct procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};
#define PROCMAP_QUERY _IOWR('f', 17, struct procmap_query)
#define PROCMAP_QUERY_VMA_READABLE 0x01
#define PROCMAP_QUERY_VMA_WRITABLE 0x02
#define PROCMAP_QUERY_VMA_EXECUTABLE 0x04
#define PROCMAP_QUERY_COVERING_OR_NEXT_VMA 0x10
#endif

struct gb_vmaq {
	pid_t pid;
	int fd;          /* /proc/PID/maps, for PROCMAP_QUERY */
	bool fallback;   /* the kernel has no PROCMAP_QUERY: parse the text */
};

struct gb_vmaq *gb_vmaq__open(pid_t pid)
{
	char path[64];
	struct gb_vmaq *q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->pid = pid;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	q->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (q->fd < 0) {
		int e = errno;
		free(q);
		errno = e == ENOENT ? ESRCH : e;
		return NULL;
	}
	return q;
}

void gb_vmaq__close(struct gb_vmaq *q)
{
	if (!q)
		return;
	close(q->fd);
	free(q);
}

static int find_parsed(struct gb_vmaq *q, uint64_t addr, bool next, struct gb_vma *out)
{
	struct gb_maps m;
	int e = gb_maps_read(q->pid, &m);
	if (e)
		return e;
	e = -ENOENT;
	for (size_t i = 0; i < m.n; i++) {
		if (m.v[i].end <= addr || (!next && m.v[i].start > addr))
			continue;
		*out = (struct gb_vma){ m.v[i].start, m.v[i].end, m.v[i].prot };
		e = 0;
		break;
	}
	gb_maps_free(&m);
	return e;
}

int gb_vmaq__find(struct gb_vmaq *q, uint64_t addr, bool next, struct gb_vma *out)
{
	if (q->fallback)
		return find_parsed(q, addr, next, out);
	struct procmap_query pq;
	memset(&pq, 0, sizeof(pq));
	pq.size = sizeof(pq);
	pq.query_addr = addr;
	pq.query_flags = next ? PROCMAP_QUERY_COVERING_OR_NEXT_VMA : 0;
	if (ioctl(q->fd, PROCMAP_QUERY, &pq)) {
		if (errno == ENOTTY || errno == EINVAL) {
			q->fallback = true;
			return find_parsed(q, addr, next, out);
		}
		return errno == ENOENT ? -ENOENT : -errno;
	}
	out->start = pq.vma_start;
	out->end = pq.vma_end;
	out->prot = (pq.vma_flags & PROCMAP_QUERY_VMA_READABLE ? PROT_READ : 0) |
		    (pq.vma_flags & PROCMAP_QUERY_VMA_WRITABLE ? PROT_WRITE : 0) |
		    (pq.vma_flags & PROCMAP_QUERY_VMA_EXECUTABLE ? PROT_EXEC : 0);
	return 0;
}
