/* The null trap (--trap none, or a range the other traps cannot take):
 * nothing runs natively, every thread is single-stepped, round-robin.  A
 * range whose module is not mapped yet is looked for after each mmap. */
#include <stdlib.h>

#include "ptrace/tracee.h"
#include "trace/engine_int.h"
#include "trap/traps.h"

struct none_trap {
	struct gb_trap base;
	struct gb_trace_range *range;
};

static void none_syscall_exit(struct gb_trap *t, struct gb_engine *e, size_t i)
{
	struct none_trap *n = (struct none_trap *)t;
	gb_trace_range_after_syscall(n->range, e->t->pid, eng_tid(e, i));
}

static void none_exec(struct gb_trap *t, struct gb_engine *e)
{
	struct none_trap *n = (struct none_trap *)t;
	gb_trace_range_exec(n->range, e->t->pid);
}

static void none_free(struct gb_trap *t) { free(t); }

static const struct gb_trap_ops none_ops = {
	.name = "no",
	.syscall_exit = none_syscall_exit,
	.exec = none_exec,
	.free = none_free,
};

struct gb_trap *gb_trap_none_new(struct gb_trace_range *r)
{
	struct none_trap *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->base.ops = &none_ops;
	n->range = r;
	return &n->base;
}
