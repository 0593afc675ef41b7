/* Finding and checking a process's CPython runtime: pyruntime.h. */
#include "sample/pyruntime.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrace/maps.h"
#include "ptrace/mem.h"
#include "sym/syms.h"

/* One CPython version's layout.  The numbers are offsetof() of the
 * version's own structs as scripts/pyoffsets.c prints them (built against
 * that version's headers with Py_BUILD_CORE); they hold for every patch
 * release of the version (CPython keeps these structs within a minor
 * version: 3.11.2 and 3.11.7 print the same). */
struct py_version {
	unsigned major, minor;
	struct gb_py_layout layout;    /* .runtime left 0 */
	uint32_t ts_interp;            /* PyThreadState.interp (the check) */
	struct gb_py_code_layout code;
};

static const struct py_version versions[] = {
	{ .major = 3, .minor = 11,
	  .layout = { .tstate_current = 576, .interp_head = 40, .threads_head = 16, .ts_next = 8,
	    .ts_native_tid = 160, .ts_cframe = 56, .cframe_current = 8, .frame_code = 32,
	    .frame_previous = 48, .frame_prev_instr = 56, .frame_is_entry = 68,
	    .code_adaptive = 184 },
	  .ts_interp = 16,
	  .code = { .ob_type = 8, .co_firstlineno = 72, .co_filename = 112, .co_name = 120,
	    .co_qualname = 128, .co_linetable = 136, .str_length = 16, .str_state = 32,
	    .str_ascii_data = 48, .str_compact_data = 72, .bytes_size = 16, .bytes_data = 32 } },
};

#define MAX_CHAIN 1024     /* frames followed per thread by the check */
#define CHECK_TRIES 3      /* a running thread may change its chain under the check */

static bool rd(pid_t pid, uint64_t addr, uint64_t *v)
{
	*v = 0;
	return addr && gb_mem_read(pid, addr, v, sizeof(*v)) == (ssize_t)sizeof(*v);
}

/* The first mapped file of pid named python* or libpython* that defines
 * _PyRuntime. */
static int find_module(pid_t pid, struct gb_syms *syms, struct gb_pyruntime *rt)
{
	struct gb_maps maps;
	uint64_t start, end;
	int found = -ENOENT;

	if (gb_maps_read(pid, &maps))
		return -ESRCH;
	for (size_t i = 0; i < maps.n && found; i++) {
		const char *p = maps.v[i].path, *base = strrchr(p, '/');
		if (p[0] != '/' || strstr(p, " (deleted)") || !base)
			continue;
		base++;
		if (strncmp(base, "python", 6) && strncmp(base, "libpython", 9))
			continue;
		if (i && !strcmp(p, maps.v[i - 1].path))
			continue;
		if (!gb_syms__resolve(syms, p, "_PyRuntime", &start, &end, NULL)) {
			rt->layout.runtime = start;
			snprintf(rt->module, sizeof(rt->module), "%s", p);
			found = 0;
		}
	}
	gb_maps_free(&maps);
	return found;
}

/* Is tid a thread of pid? */
static bool has_thread(pid_t pid, uint64_t tid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%" PRIu64, pid, tid);
	return tid && tid < (1u << 30) && access(path, F_OK) == 0;
}

/* One pass of the check.  GB_PYRT_OK, NOT_READY or UNKNOWN (why set). */
static enum gb_pyrt_result check(pid_t pid, const struct gb_pyruntime *rt, char *why, size_t len)
{
	const struct gb_py_layout *L = &rt->layout;
	uint64_t head, ts, v, frame, code, type;
	int matched = 0;

	if (!rd(pid, L->runtime + L->interp_head, &head)) {
		snprintf(why, len, "exited before its Python runtime was checked");
		return GB_PYRT_GONE;
	}
	if (!head) {
		snprintf(why, len, "no interpreter yet (_PyRuntime.interpreters.head is 0)");
		return GB_PYRT_NOT_READY;
	}
	if (!rd(pid, head + L->threads_head, &ts) || !ts) {
		snprintf(why, len, "the interpreter has no thread state yet");
		return GB_PYRT_NOT_READY;
	}
	for (int i = 0; ts && i < 4 * GB_MAX_PYTHREADS; i++) {
		if (!rd(pid, ts + rt->ts_interp, &v) || v != head) {
			snprintf(why, len, "thread state 0x%" PRIx64 " does not point back at its "
				 "interpreter 0x%" PRIx64, ts, head);
			return GB_PYRT_UNKNOWN;
		}
		if (rd(pid, ts + L->ts_native_tid, &v) && has_thread(pid, v)) {
			matched++;
			rd(pid, ts + L->ts_cframe, &v);
			rd(pid, v ? v + L->cframe_current : 0, &frame);
			for (int k = 0; frame && k < MAX_CHAIN; k++) {
				if (!rd(pid, frame + L->frame_code, &code) ||
				    !rd(pid, code + rt->code.ob_type, &type) || type != rt->code_type) {
					snprintf(why, len, "frame 0x%" PRIx64 ": code object 0x%" PRIx64
						 " has type 0x%" PRIx64 ", not PyCode_Type (0x%"
						 PRIx64 ")", frame, code, type, rt->code_type);
					return GB_PYRT_UNKNOWN;
				}
				if (!rd(pid, frame + L->frame_previous, &frame))
					break;
			}
		}
		if (!rd(pid, ts + L->ts_next, &ts))
			break;
	}
	if (!matched) {
		snprintf(why, len, "no thread state of the interpreter names a thread of the process");
		return GB_PYRT_NOT_READY;
	}
	return GB_PYRT_OK;
}

enum gb_pyrt_result gb_pyruntime_find(pid_t pid, struct gb_pyruntime *rt, char *why, size_t len)
{
	const struct py_version *pv = NULL;
	struct gb_syms *syms = gb_syms__new(pid);
	uint64_t a, e;
	enum gb_pyrt_result r = GB_PYRT_UNKNOWN;

	memset(rt, 0, sizeof(*rt));
	if (!syms) {
		snprintf(why, len, "its maps: %s", strerror(errno));
		return GB_PYRT_NOT_PYTHON;
	}
	if (find_module(pid, syms, rt)) {
		snprintf(why, len, "no CPython runtime (_PyRuntime) in a python* file it maps");
		r = GB_PYRT_NOT_PYTHON;
		goto out;
	}
	if (gb_syms__resolve(syms, rt->module, "Py_Version", &a, &e, NULL) ||
	    gb_mem_read(pid, a, &rt->version, sizeof(rt->version)) != sizeof(rt->version)) {
		snprintf(why, len, "%s has no Py_Version: a CPython before 3.11 (gebpf reads 3.11)",
			 rt->module);
		goto out;
	}
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		if ((rt->version >> 24) == versions[i].major &&
		    ((rt->version >> 16) & 0xff) == versions[i].minor)
			pv = &versions[i];
	if (!pv) {
		snprintf(why, len, "Python %lu.%lu (%s): no layout known to gebpf (it reads 3.11)",
			 rt->version >> 24, (rt->version >> 16) & 0xff, rt->module);
		goto out;
	}
	if (gb_syms__resolve(syms, rt->module, "PyCode_Type", &rt->code_type, &e, NULL) ||
	    gb_syms__resolve(syms, rt->module, "_PyEval_EvalFrameDefault", &rt->eval_start,
			     &rt->eval_end, NULL)) {
		snprintf(why, len, "%s: no PyCode_Type or _PyEval_EvalFrameDefault symbol",
			 rt->module);
		goto out;
	}
	a = rt->layout.runtime;
	rt->layout = pv->layout;
	rt->layout.runtime = a;
	rt->code = pv->code;
	rt->ts_interp = pv->ts_interp;
	r = GB_PYRT_OK;
out:
	gb_syms__free(syms);
	return r;
}

enum gb_pyrt_result gb_pyruntime_check(pid_t pid, const struct gb_pyruntime *rt, char *why,
				       size_t len)
{
	enum gb_pyrt_result r = GB_PYRT_UNKNOWN;

	for (int i = 0; i < CHECK_TRIES; i++)
		if ((r = check(pid, rt, why, len)) == GB_PYRT_OK || r == GB_PYRT_GONE)
			break;
	return r;
}
