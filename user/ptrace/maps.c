#include "ptrace/maps.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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
		if (out->n == cap) {
			cap = cap ? cap * 2 : 64;
			struct gb_map *v = realloc(out->v, cap * sizeof(*v));
			if (!v) {
				fclose(f);
				gb_maps_free(out);
				return -ENOMEM;
			}
			out->v = v;
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
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (addr < m->v[mid].start)
			hi = mid;
		else if (addr >= m->v[mid].end)
			lo = mid + 1;
		else
			return &m->v[mid];
	}
	return NULL;
}
