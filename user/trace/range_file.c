/* The range as one file's code: see range_file.h. */
#include "trace/range_file.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>

#include "ptrace/maps.h"
#include "sym/syms.h"

const char *gb_trace_range_file(pid_t pid, uint64_t start, uint64_t end, char *path, size_t len,
				uint64_t *lo, uint64_t *hi, uint64_t *bias)
{
	uint64_t vhi, off;
	/* Code on a writable page may be rewritten under the probes (and the
	 * probes' int3 with it): the page trap watches such code. */
	struct gb_maps m;
	if (gb_maps_read(pid, &m) == 0) {
		bool writable = false;
		for (size_t k = 0; k < m.n; k++)
			if (m.v[k].start <= end && m.v[k].end > start &&
			    (m.v[k].prot & PROT_WRITE))
				writable = true;
		gb_maps_free(&m);
		if (writable)
			return "on writable pages (code may change)";
	}
	struct gb_syms *sy = gb_syms__new(pid);
	if (!sy)
		return "no symbols";
	int r = gb_syms__to_file(sy, start, path, len, lo, &off);
	if (!r) {
		char path2[4096];
		r = gb_syms__to_file(sy, end, path2, sizeof(path2), &vhi, &off);
		if (!r && (strcmp(path, path2) || vhi - *lo != end - start))
			r = -EXDEV;
	}
	gb_syms__free(sy);
	if (r)
		return r == -EXDEV ? "not in one file's code (it spans several mappings)"
				   : "not in one file's code (anonymous memory)";
	*hi = vhi;
	*bias = start - *lo;
	return NULL;
}
