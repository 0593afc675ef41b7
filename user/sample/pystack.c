/* Python frames in sampled stacks: pystack.h. */
#include "sample/pystack.h"

#include <search.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "sample/pycode.h"
#include "sample/pyruntime.h"

#define RETRY_S 0.02
#define GIVE_UP_S 5.0

/* P_NEW: not looked at yet; P_CHECKING: found and registered with the
 * sampler (its BPF program reads the frames from then on), its check
 * against the live process not passed yet; P_PYTHON: checked; P_OFF: not
 * a Python gebpf reads (deregistered). */
enum pstate { P_NEW, P_CHECKING, P_PYTHON, P_OFF };

struct pyproc {
	pid_t pid;
	enum pstate state;
	double first_try, last_try, wait;
	struct gb_pyruntime rt;
};

struct gb_pystacks {
	struct gb_sampler *smp;
	struct gb_pycode *code;
	void *procs;               /* struct pyproc by pid */
	struct gb_pystacks_stats st;
};

static int cmp_proc(const void *a, const void *b)
{
	pid_t x = ((const struct pyproc *)a)->pid, y = ((const struct pyproc *)b)->pid;
	return (x > y) - (x < y);
}

struct gb_pystacks *gb_pystacks__new(struct gb_sampler *smp)
{
	struct gb_pystacks *ps = calloc(1, sizeof(*ps));

	if (!ps || !(ps->code = gb_pycode__new())) {
		free(ps);
		return NULL;
	}
	ps->smp = smp;
	return ps;
}

static void turn_off(struct gb_pystacks *ps, struct pyproc *p, const char *why)
{
	gb_sampler__del_python(ps->smp, p->pid);   /* (also a parent's copied at fork) */
	gb_warn("sample: pid %d: Python frames off (native stacks only): %s", p->pid, why);
	p->state = P_OFF;
}

/* Find the runtime and register it (P_NEW), then check it (P_CHECKING):
 * at most every RETRY_S, giving up after GIVE_UP_S of an interpreter that
 * is not initialized; a process with no runtime is looked at again with a
 * doubling wait for GIVE_UP_S (a library mapped after the exec).  now: the
 * time of the sample that asks (CLOCK_MONOTONIC seconds), so that the
 * waits are the process's time, not that of a user side behind it. */
static void advance(struct gb_pystacks *ps, struct pyproc *p, double now)
{
	char why[512];
	enum gb_pyrt_result r;
	int err;

	if (p->last_try && now - p->last_try < (p->wait > RETRY_S ? p->wait : RETRY_S))
		return;
	if (!p->first_try)
		p->first_try = now;
	p->last_try = now;
	if (p->state == P_NEW) {
		r = gb_pyruntime_find(p->pid, &p->rt, why, sizeof(why));
		if (r == GB_PYRT_NOT_PYTHON) {
			/* Maybe not yet: ld.so maps libpython after the exec.
			 * Looked at again after 20, 40, 80 ... ms, for 5 s. */
			p->wait = p->wait ? 2 * p->wait : RETRY_S;
			if (now - p->first_try + p->wait < GIVE_UP_S)
				return;
			gb_info("sample: pid %d: not Python: %s", p->pid, why);
			gb_sampler__del_python(ps->smp, p->pid);
			p->state = P_OFF;
			return;
		}
		if (r != GB_PYRT_OK) {
			turn_off(ps, p, why);
			return;
		}
		err = gb_sampler__add_python(ps->smp, p->pid, &p->rt.layout);
		if (err) {
			snprintf(why, sizeof(why), "registering it: %s", strerror(-err));
			turn_off(ps, p, why);
			return;
		}
		p->state = P_CHECKING;
	}
	r = gb_pyruntime_check(p->pid, &p->rt, why, sizeof(why));
	if (r == GB_PYRT_GONE) {
		gb_info("sample: pid %d: %s", p->pid, why);
		gb_sampler__del_python(ps->smp, p->pid);
		p->state = P_OFF;
	} else if (r == GB_PYRT_OK) {
		gb_info("sample: pid %d: Python %lu.%lu.%lu (%s): Python frames on", p->pid,
			p->rt.version >> 24, (p->rt.version >> 16) & 0xff,
			(p->rt.version >> 8) & 0xff, p->rt.module);
		p->state = P_PYTHON;
		ps->st.procs++;
	} else if (r == GB_PYRT_UNKNOWN || now - p->first_try >= GIVE_UP_S) {
		turn_off(ps, p, why);
	}
}

static struct pyproc *get_proc(struct gb_pystacks *ps, pid_t pid)
{
	struct pyproc key = { .pid = pid }, *p, **slot = tfind(&key, &ps->procs, cmp_proc);

	if (slot)
		return *slot;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	if (!tsearch(p, &ps->procs, cmp_proc)) {
		free(p);
		return NULL;
	}
	return p;
}

void gb_pystacks__look(struct gb_pystacks *ps, pid_t pid)
{
	struct pyproc *p = get_proc(ps, pid);

	if (p && p->state < P_PYTHON)
		advance(ps, p, gb_mono_s());
}

/* Append Python frame f of p to out. */
static void put_py(struct gb_pystacks *ps, struct pyproc *p, const struct gb_py_frame *f,
		   uint64_t ns, struct gb_profile_frame *out, size_t *k, size_t max)
{
	int line;
	const struct gb_pyfunc *fn;

	if (*k >= max)
		return;
	fn = gb_pycode__name(ps->code, p->pid, &p->rt, f->code, f->lasti, ns, &line);
	if (!fn) {
		ps->st.unnamed++;
		return;
	}
	out[(*k)++] = (struct gb_profile_frame){ .py = fn, .line = line };
	ps->st.frames++;
}

size_t gb_pystacks__merge(struct gb_pystacks *ps, const struct gb_sample *s,
			  const uint64_t *pcs, size_t n, struct gb_profile_frame *out,
			  size_t max)
{
	struct pyproc *p = get_proc(ps, s->pid);
	size_t k = 0, j = 0, npy = 0;

	if (p && p->state < P_PYTHON)
		advance(ps, p, (double)s->ns / 1e9);
	if (p && p->state == P_PYTHON && (s->pystate & GB_PYSTATE_THREAD))
		npy = s->npy;
	if (npy)
		ps->st.samples++;
	for (size_t i = 0; i < n && k < max; i++) {
		uint64_t a = i ? pcs[i] - 1 : pcs[i];   /* a return address: its call */
		if (j < npy && a >= p->rt.eval_start && a <= p->rt.eval_end) {
			size_t k0 = k;
			while (j < npy) {
				/* the evaluation's first frame: 3.11's is_entry,
				 * or the frame above a shim (3.12 on) */
				if (s->py[j].flags & GB_PYFRAME_F_SHIM) {
					j++;
					break;
				}
				bool entry = s->py[j].flags & GB_PYFRAME_F_ENTRY;
				put_py(ps, p, &s->py[j++], s->ns, out, &k, max);
				if (entry)
					break;
			}
			if (k > k0)
				continue;
			/* none could be named: the interpreter's frame stays */
		}
		out[k++] = (struct gb_profile_frame){ .addr = pcs[i], .ret = i > 0 };
	}
	for (; j < npy; j++)
		if (!(s->py[j].flags & GB_PYFRAME_F_SHIM))
			put_py(ps, p, &s->py[j], s->ns, out, &k, max);
	return k;
}

void gb_pystacks__stats(const struct gb_pystacks *ps, struct gb_pystacks_stats *st)
{
	*st = ps->st;
}

void gb_pystacks__free(struct gb_pystacks *ps)
{
	if (!ps)
		return;
	tdestroy(ps->procs, free);
	gb_pycode__free(ps->code);
	free(ps);
}
