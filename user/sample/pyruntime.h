/* The CPython runtime of a live process: where its interpreter keeps the
 * thread states and frames that bpf/pyframes.bpf.h walks, and the layout of
 * its code objects that pycode.h reads.  docs/sample.md "Python frames".
 *
 * A process is looked at as Python when a file it maps whose name starts
 * with "python" or "libpython" (/usr/bin/python3.11, libpython3.11.so.1.0)
 * defines _PyRuntime.  Its version is read from the process (Py_Version,
 * CPython 3.11+), the struct offsets come from a table per version (3.11,
 * 3.12) or from the interpreter's own _Py_DebugOffsets (3.13)
 * (generated from the CPython headers: scripts/pyoffsets.c), and they are
 * checked against the live process before use:
 *   - _PyRuntime.interpreters.head is a readable interpreter whose thread
 *     list (threads.head, next) links thread states back to it (interp),
 *   - one of them has the native_thread_id of a thread of the process,
 *   - the code object of every frame on those threads' chains (cframe,
 *     current_frame, previous, f_code) has the type &PyCode_Type.
 * Nothing is guessed: a version without a table entry, or a failed check,
 * is GB_PYRT_UNKNOWN with the reason.
 *
 *   struct gb_pyruntime rt;
 *   if (gb_pyruntime_find(pid, &rt, why, sizeof(why)) == GB_PYRT_OK)
 *           r = gb_pyruntime_check(pid, &rt, why, sizeof(why));
 */
#ifndef GB_SAMPLE_PYRUNTIME_H
#define GB_SAMPLE_PYRUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gebpf_events.h"

/* Offsets into code objects and the objects they point at (bytes). */
struct gb_py_code_layout {
	uint32_t ob_type;          /* PyObject.ob_type */
	uint32_t co_firstlineno, co_filename, co_name, co_qualname, co_linetable;
	uint32_t str_length;       /* PyASCIIObject.length */
	uint32_t str_state;        /* PyASCIIObject.state (interned:2 kind:3 compact:1 ascii:1) */
	uint32_t str_ascii_data;   /* sizeof(PyASCIIObject): a compact ASCII string's bytes */
	uint32_t str_compact_data; /* sizeof(PyCompactUnicodeObject): other compact strings */
	uint32_t bytes_size;       /* PyVarObject.ob_size of a bytes object */
	uint32_t bytes_data;       /* PyBytesObject.ob_sval */
};

struct gb_pyruntime {
	struct gb_py_layout layout;    /* for the BPF program (layout.runtime: &_PyRuntime) */
	struct gb_py_code_layout code; /* for naming */
	uint64_t code_type;            /* &PyCode_Type */
	uint64_t eval_start, eval_end; /* _PyEval_EvalFrameDefault, inclusive */
	unsigned long version;         /* PY_VERSION_HEX (Py_Version) */
	uint32_t ts_interp;            /* PyThreadState.interp (the check) */
	char module[4096];             /* the file defining _PyRuntime */
};

enum gb_pyrt_result {
	GB_PYRT_OK = 0,            /* found and checked */
	GB_PYRT_NOT_PYTHON,        /* no CPython runtime in the process */
	GB_PYRT_NOT_READY,         /* no interpreter or thread state yet: try again later */
	GB_PYRT_UNKNOWN,           /* a Python gebpf cannot read: why says it */
	GB_PYRT_GONE,              /* (check) the process exited: its memory is unreadable */
};

/* Find the runtime of pid and its version's layout, from its files and
 * Py_Version alone: this works before the interpreter is initialized (a
 * command right after its exec).  GB_PYRT_OK, NOT_PYTHON or UNKNOWN; why
 * gets the reason for every result but GB_PYRT_OK. */
enum gb_pyrt_result gb_pyruntime_find(pid_t pid, struct gb_pyruntime *rt, char *why, size_t len);
/* Check a found layout against the live process (the checks above).
 * GB_PYRT_OK, NOT_READY (no interpreter or thread state yet), UNKNOWN, or
 * GONE. */
enum gb_pyrt_result gb_pyruntime_check(pid_t pid, const struct gb_pyruntime *rt, char *why,
				       size_t len);

#endif
