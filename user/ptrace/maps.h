/* /proc/PID/maps as data. */
#ifndef GB_PTRACE_MAPS_H
#define GB_PTRACE_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct gb_map {
	uint64_t start, end;        /* [start, end) */
	uint64_t offset;            /* file offset */
	uint64_t inode;
	unsigned dev_major, dev_minor;
	char perms[5];              /* "r-xp" */
	int prot;                   /* PROT_* from perms */
	char path[4096];            /* "" for anonymous, "[stack]", "/usr/lib/..." (" (deleted)" kept) */
};

struct gb_maps {
	struct gb_map *v;
	size_t n;
};

/* 0 or -errno (-ESRCH when the process is gone). */
int gb_maps_read(pid_t pid, struct gb_maps *out);
void gb_maps_free(struct gb_maps *m);
/* The map holding addr, or NULL. */
const struct gb_map *gb_maps_find(const struct gb_maps *m, uint64_t addr);

#endif

/* Fast VMA queries on a live process: the PROCMAP_QUERY ioctl (Linux 6.11+)
 * on a kept-open /proc/PID/maps (one ioctl, no text), falling back to
 * parsing /proc/PID/maps on older kernels.  The descriptor follows the
 * process's current address space until it execs: open a new one then. */
struct gb_vmaq;

struct gb_vma {
	uint64_t start, end;        /* [start, end) */
	int prot;                   /* PROT_READ | PROT_WRITE | PROT_EXEC */
};

struct gb_vmaq *gb_vmaq__open(pid_t pid);   /* NULL with errno */
/* The VMA holding addr, or (next = true) the first one above it.
 * 0, or -ENOENT when there is none. */
int gb_vmaq__find(struct gb_vmaq *q, uint64_t addr, bool next, struct gb_vma *out);
void gb_vmaq__close(struct gb_vmaq *q);
