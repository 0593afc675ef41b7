// SPDX-License-Identifier: GPL-2.0
#include "sym/boundary.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "decode/flow.h"
#include "ptrace/mem.h"
#include "sym/syms.h"

int gb_boundary_check(pid_t pid, uint64_t addr, struct gb_boundary *out)
{
	uint64_t size = 0;
	memset(out, 0, sizeof(*out));
	struct gb_syms *sy = gb_syms__new(pid);
	int r = sy ? gb_syms__func_at(sy, addr, out->func, sizeof(out->func), &out->fn, &size)
		   : -ENOENT;
	gb_syms__free(sy);
	if (r) {
		out->func[0] = '\0';
		out->kind = GB_BOUNDARY_UNKNOWN;
		out->why = "is in no sized function symbol";
		return 0;
	}
	if (out->fn == addr) {
		out->kind = GB_BOUNDARY_YES;
		return 0;
	}
	/* Up to addr and the whole instruction there. */
	size_t n = (size_t)(addr - out->fn) + 15;
	if (n > size)
		n = size;
	uint8_t *buf = malloc(n);
	if (!buf)
		return -ENOMEM;
	ssize_t got = gb_mem_read(pid, out->fn, buf, n);
	r = got > (ssize_t)(addr - out->fn)
		    ? gb_flow_boundary(out->fn, buf, (size_t)got, addr, &out->prev, &out->next)
		    : -EIO;
	free(buf);
	if (r < 0) {
		out->kind = GB_BOUNDARY_UNKNOWN;
		out->why = r == -EIO ? "its function's bytes are unreadable" : "its function does not decode";
	} else {
		out->kind = r ? GB_BOUNDARY_INSIDE : GB_BOUNDARY_YES;
	}
	return 0;
}
