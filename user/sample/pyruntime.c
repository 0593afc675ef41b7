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
 * version: 3.11.2 and 3.11.7 print the same).  From 3.13 on the interpreter
 * carries them itself (debug_offsets() below). */
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
	/* 3.12: the current thread state is a C thread-local (none in
	 * _PyRuntime: the thread list is searched), no is_entry (the C
	 * stack's shim frames mark the entries: owner), no wstr in strings. */
	{ .major = 3, .minor = 12,
	  .layout = { .tstate_current = 0, .interp_head = 40, .threads_head = 72, .ts_next = 8,
	    .ts_native_tid = 144, .ts_cframe = 56, .cframe_current = 0, .frame_code = 0,
	    .frame_previous = 8, .frame_prev_instr = 56, .code_adaptive = 192,
	    .frame_owner = 70, .owner_cstack = 3 },
	  .ts_interp = 16,
	  .code = { .ob_type = 8, .co_firstlineno = 68, .co_filename = 112, .co_name = 120,
	    .co_qualname = 128, .co_linetable = 136, .str_length = 16, .str_state = 32,
	    .str_ascii_data = 40, .str_compact_data = 56, .bytes_size = 16, .bytes_data = 32 } },
};

/* _Py_DebugOffsets as CPython 3.13 lays it out at the start of _PyRuntime
 * (Include/internal/pycore_runtime.h): offsets of the interpreter's own
 * structs, each section led by its struct's size.  Only the fields gebpf
 * reads are named. */
struct py_debug_offsets_313 {
	char cookie[8];                /* "xdebugpy" */
	uint64_t version;              /* PY_VERSION_HEX */
	uint64_t free_threaded;
	struct { uint64_t size, finalizing, interpreters_head; } runtime_state;
	struct { uint64_t size, id, next, threads_head, more[9]; } interpreter_state;
	struct { uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id,
		 datastack_chunk, status; } thread_state;
	struct { uint64_t size, previous, executable, instr_ptr, localsplus, owner; } interpreter_frame;
	struct { uint64_t size, filename, name, qualname, linetable, firstlineno, argcount,
		 localsplusnames, localspluskinds, co_code_adaptive; } code_object;
	struct { uint64_t size, ob_type; } pyobject;
	struct { uint64_t size, tp_name, tp_repr, tp_flags; } type_object;
	struct { uint64_t size, ob_item, ob_size; } tuple_object, list_object;
	struct { uint64_t size, ma_keys, ma_values; } dict_object;
	struct { uint64_t size, ob_fval; } float_object;
	struct { uint64_t size, lv_tag, ob_digit; } long_object;
	struct { uint64_t size, ob_size, ob_sval; } bytes_object;
	struct { uint64_t size, state, length, asciiobject_size; } unicode_object;
	struct { uint64_t size, collecting; } gc;
};
_Static_assert(sizeof(struct py_debug_offsets_313) == 584, "3.13's _Py_DebugOffsets");

/* FRAME_OWNED_BY_CSTACK (3.12, 3.13; named FRAME_OWNED_BY_INTERPRETER
 * later): the shim frame below each evaluation's first frame. */
#define PY_OWNED_BY_CSTACK 3

static bool off32(uint64_t v, uint32_t *out)
{
	*out = (uint32_t)v;
	return v < (1u << 20);     /* (a struct offset; garbage is refused) */
}

/* The layout of a 3.13 process from the debug offsets its _PyRuntime
 * starts with.  0, or -1 with why set. */
static int debug_offsets(pid_t pid, struct gb_pyruntime *rt, char *why, size_t len)
{
	struct py_debug_offsets_313 d;
	struct gb_py_layout *L = &rt->layout;
	struct gb_py_code_layout *C = &rt->code;
	bool ok = true;

	if (gb_mem_read(pid, L->runtime, &d, sizeof(d)) != (ssize_t)sizeof(d)) {
		snprintf(why, len, "%s: its _PyRuntime's debug offsets cannot be read", rt->module);
		return -1;
	}
	if (memcmp(d.cookie, "xdebugpy", 8) || (d.version >> 16) != (rt->version >> 16)) {
		snprintf(why, len, "%s: _PyRuntime does not start with the debug offsets of its "
			 "version (cookie %.8s, version 0x%llx)", rt->module, d.cookie,
			 (unsigned long long)d.version);
		return -1;
	}
	if (d.free_threaded) {
		snprintf(why, len, "%s is a free-threaded build (no GIL): its frames are not read "
			 "(native stacks only)", rt->module);
		return -1;
	}
	*L = (struct gb_py_layout){ .runtime = L->runtime, .cframe_current = GB_PY_FRAME_DIRECT,
				    .owner_cstack = PY_OWNED_BY_CSTACK };
	ok &= off32(d.runtime_state.interpreters_head, &L->interp_head);
	ok &= off32(d.interpreter_state.threads_head, &L->threads_head);
	ok &= off32(d.thread_state.next, &L->ts_next);
	ok &= off32(d.thread_state.native_thread_id, &L->ts_native_tid);
	ok &= off32(d.thread_state.current_frame, &L->ts_cframe);
	ok &= off32(d.thread_state.interp, &rt->ts_interp);
	ok &= off32(d.interpreter_frame.executable, &L->frame_code);
	ok &= off32(d.interpreter_frame.previous, &L->frame_previous);
	ok &= off32(d.interpreter_frame.instr_ptr, &L->frame_prev_instr);
	ok &= off32(d.interpreter_frame.owner, &L->frame_owner);
	ok &= off32(d.code_object.co_code_adaptive, &L->code_adaptive);
	ok &= off32(d.pyobject.ob_type, &C->ob_type);
	ok &= off32(d.code_object.firstlineno, &C->co_firstlineno);
	ok &= off32(d.code_object.filename, &C->co_filename);
	ok &= off32(d.code_object.name, &C->co_name);
	ok &= off32(d.code_object.qualname, &C->co_qualname);
	ok &= off32(d.code_object.linetable, &C->co_linetable);
	ok &= off32(d.unicode_object.length, &C->str_length);
	ok &= off32(d.unicode_object.state, &C->str_state);
	ok &= off32(d.unicode_object.asciiobject_size, &C->str_ascii_data);
	/* PyCompactUnicodeObject: PyASCIIObject, utf8_length, utf8 (3.12 on) */
	C->str_compact_data = C->str_ascii_data + 16;
	ok &= off32(d.bytes_object.ob_size, &C->bytes_size);
	ok &= off32(d.bytes_object.ob_sval, &C->bytes_data);
	if (!ok || !L->frame_owner) {
		snprintf(why, len, "%s: its debug offsets are out of bounds", rt->module);
		return -1;
	}
	return 0;
}

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
			if (L->cframe_current == GB_PY_FRAME_DIRECT)
				frame = v;
			else
				rd(pid, v ? v + L->cframe_current : 0, &frame);
			for (int k = 0; frame && k < MAX_CHAIN; k++) {
				uint8_t owner = 0;
				/* (a shim's executable is no code object in 3.13: None) */
				if (L->frame_owner &&
				    gb_mem_read(pid, frame + L->frame_owner, &owner, 1) == 1 &&
				    owner == L->owner_cstack) {
					if (!rd(pid, frame + L->frame_previous, &frame))
						break;
					continue;
				}
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
		snprintf(why, len, "%s has no Py_Version: a CPython before 3.11 (gebpf reads 3.11 to 3.13)",
			 rt->module);
		goto out;
	}
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		if ((rt->version >> 24) == versions[i].major &&
		    ((rt->version >> 16) & 0xff) == versions[i].minor)
			pv = &versions[i];
	/* 3.13: the layout from the interpreter's own debug offsets.  A later
	 * version lays those out otherwise (fields added in 3.14): refused
	 * until gebpf knows that layout. */
	bool own = rt->version >> 16 == 0x030d;
	if (!pv && !own) {
		snprintf(why, len, "Python %lu.%lu (%s): no layout known to gebpf (it reads 3.11 to "
			 "3.13)", rt->version >> 24, (rt->version >> 16) & 0xff, rt->module);
		goto out;
	}
	if (gb_syms__resolve(syms, rt->module, "PyCode_Type", &rt->code_type, &e, NULL) ||
	    gb_syms__resolve(syms, rt->module, "_PyEval_EvalFrameDefault", &rt->eval_start,
			     &rt->eval_end, NULL)) {
		snprintf(why, len, "%s: no PyCode_Type or _PyEval_EvalFrameDefault symbol",
			 rt->module);
		goto out;
	}
	if (own) {
		if (debug_offsets(pid, rt, why, len))
			goto out;
	} else {
		a = rt->layout.runtime;
		rt->layout = pv->layout;
		rt->layout.runtime = a;
		rt->code = pv->code;
		rt->ts_interp = pv->ts_interp;
	}
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
