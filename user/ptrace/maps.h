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
