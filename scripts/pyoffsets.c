/* Prints the struct offsets gebpf needs of one CPython version, as the
 * entry of the version table in user/sample/pyruntime.c.  Build it against
 * that version's headers (internal ones included):
 *
 *   gcc $(/usr/bin/python3.11-config --includes) scripts/pyoffsets.c -o pyoffsets && ./pyoffsets
 *
 * (Debian: python3.11-dev.)  Written for 3.11's structs; 3.12's entry was
 * printed by the same fields with tstate_current 0 (a C thread-local in
 * 3.12), _PyInterpreterFrame.owner in place of is_entry, and without
 * wstr (docs/sample.md "Python frames").  3.13 needs no entry: gebpf reads
 * the interpreter's own _Py_DebugOffsets.
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#include <stddef.h>
#include <stdio.h>

#define O(type, field) ((unsigned)offsetof(type, field))

int main(void)
{
	printf("\t/* PY_VERSION_HEX 0x%08x (%s) */\n", PY_VERSION_HEX, PY_VERSION);
	printf("\t{ .major = %d, .minor = %d,\n", PY_MAJOR_VERSION, PY_MINOR_VERSION);
	printf("\t  .layout = { .tstate_current = %u, .interp_head = %u, .threads_head = %u, "
	       ".ts_next = %u,\n", O(_PyRuntimeState, gilstate.tstate_current),
	       O(_PyRuntimeState, interpreters.head), O(PyInterpreterState, threads.head),
	       O(PyThreadState, next));
	printf("\t    .ts_native_tid = %u, .ts_cframe = %u, .cframe_current = %u, .frame_code = %u,\n",
	       O(PyThreadState, native_thread_id), O(PyThreadState, cframe),
	       O(_PyCFrame, current_frame), O(_PyInterpreterFrame, f_code));
	printf("\t    .frame_previous = %u, .frame_prev_instr = %u, .frame_is_entry = %u,\n",
	       O(_PyInterpreterFrame, previous), O(_PyInterpreterFrame, prev_instr),
	       O(_PyInterpreterFrame, is_entry));
	printf("\t    .code_adaptive = %u },\n", O(PyCodeObject, co_code_adaptive));
	printf("\t  .ts_interp = %u,\n", O(PyThreadState, interp));
	printf("\t  .code = { .ob_type = %u, .co_firstlineno = %u, .co_filename = %u, .co_name = %u,\n",
	       O(PyObject, ob_type), O(PyCodeObject, co_firstlineno), O(PyCodeObject, co_filename),
	       O(PyCodeObject, co_name));
	printf("\t    .co_qualname = %u, .co_linetable = %u, .str_length = %u, .str_state = %u,\n",
	       O(PyCodeObject, co_qualname), O(PyCodeObject, co_linetable),
	       O(PyASCIIObject, length), O(PyASCIIObject, state));
	printf("\t    .str_ascii_data = %u, .str_compact_data = %u, .bytes_size = %u, "
	       ".bytes_data = %u } },\n", (unsigned)sizeof(PyASCIIObject),
	       (unsigned)sizeof(PyCompactUnicodeObject), O(PyVarObject, ob_size),
	       O(PyBytesObject, ob_sval));
	return 0;
}
