/* gebpf diff of two snapshots: registers per thread (matched by index),
 * maps added/removed/changed, and the address ranges of pages whose bytes
 * differ.  One line per difference, "-" for A and "+" for B. */
#include "snap/diff.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "snap/note_json.h"

static void diff_threads(const struct gb_snapshot *a, const struct gb_snapshot *b, FILE *out, int *n)
{
	if (a->nthreads != b->nthreads) {
		fprintf(out, "threads: %zu -> %zu\n", a->nthreads, b->nthreads);
		(*n)++;
	}
	size_t nt = a->nthreads < b->nthreads ? a->nthreads : b->nthreads;
	for (size_t i = 0; i < nt; i++) {
		const struct gb_snap_thread *x = &a->threads[i], *y = &b->threads[i];
		for (size_t r = 0; r < gb_snap__nregs; r++) {
			uint64_t u, v;
			memcpy(&u, (const char *)&x->regs + gb_snap__regs[r].off, 8);
			memcpy(&v, (const char *)&y->regs + gb_snap__regs[r].off, 8);
			if (u != v) {
				fprintf(out, "thread %zu (tid %d/%d): %s 0x%" PRIx64 " -> 0x%" PRIx64 "\n", i,
					x->tid, y->tid, gb_snap__regs[r].name, u, v);
				(*n)++;
			}
		}
		if (memcmp(&x->fpregs, &y->fpregs, sizeof(x->fpregs))) {
			fprintf(out, "thread %zu (tid %d/%d): x87/SSE state (NT_FPREGSET) differs\n", i, x->tid, y->tid);
			(*n)++;
		}
		if (x->xstate_len != y->xstate_len ||
		    (x->xstate_len && memcmp(x->xstate, y->xstate, x->xstate_len))) {
			fprintf(out, "thread %zu (tid %d/%d): extended state (NT_X86_XSTATE) differs\n", i, x->tid,
				y->tid);
			(*n)++;
		}
	}
}

static void print_map(FILE *out, char sign, const struct gb_snap_map *m)
{
	fprintf(out, "%c map 0x%" PRIx64 "-0x%" PRIx64 " %s%s%s\n", sign, m->start, m->end, m->perms,
		m->path && *m->path ? " " : "", m->path ? m->path : "");
}

/* Differing pages of the overlap of two maps, coalesced into ranges. */
static void diff_pages(const struct gb_snap_map *x, const struct gb_snap_map *y, FILE *out, int *n)
{
	uint64_t lo = x->start > y->start ? x->start : y->start;
	uint64_t hi = x->end < y->end ? x->end : y->end;
	uint64_t run = 0, pages = 0;
	bool in_run = false;
	if (!x->data || !y->data) {
		if (!!x->data != !!y->data) {
			fprintf(out, "mem 0x%" PRIx64 "-0x%" PRIx64 ": bytes only in %s\n", lo, hi, x->data ? "A" : "B");
			(*n)++;
		}
		return;
	}
	for (uint64_t p = lo; p <= hi; p += GB_PAGE_SIZE) {
		bool d = p < hi && memcmp(x->data + (p - x->start), y->data + (p - y->start), GB_PAGE_SIZE);
		if (d && !in_run) {
			run = p;
			pages = 0;
			in_run = true;
		}
		if (d)
			pages++;
		if (!d && in_run) {
			fprintf(out, "mem 0x%" PRIx64 "-0x%" PRIx64 " (%" PRIu64 " page%s) differs%s%s\n", run, p,
				pages, pages == 1 ? "" : "s", x->path && *x->path ? " in " : "",
				x->path ? x->path : "");
			(*n)++;
			in_run = false;
		}
	}
}

int gb_snap_diff(const struct gb_snapshot *a, const struct gb_snapshot *b, FILE *out)
{
	int n = 0;
	diff_threads(a, b, out, &n);
	size_t i = 0, j = 0;
	while (i < a->nmaps || j < b->nmaps) {
		const struct gb_snap_map *x = i < a->nmaps ? &a->maps[i] : NULL;
		const struct gb_snap_map *y = j < b->nmaps ? &b->maps[j] : NULL;
		if (x && y && x->start == y->start) {
			if (x->end != y->end || strcmp(x->perms, y->perms) || strcmp(x->path, y->path)) {
				print_map(out, '-', x);
				print_map(out, '+', y);
				n++;
			}
			diff_pages(x, y, out, &n);
			i++, j++;
		} else if (x && (!y || x->start < y->start)) {
			print_map(out, '-', x);
			n++;
			i++;
		} else {
			print_map(out, '+', y);
			n++;
			j++;
		}
	}
	return n;
}
