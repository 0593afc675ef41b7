/* CPython frames of a sampled thread (included by sample.bpf.c).
 *
 * For a process registered in py_procs (user/sample/pyruntime.c found its
 * _PyRuntime and checked the layout against it), find the sampled thread's
 * PyThreadState -- _PyRuntime.gilstate.tstate_current when that is the
 * thread (it holds the GIL), else the interpreter's thread list searched for
 * native_thread_id == tid (a thread that released the GIL: a blocking call,
 * hashlib on a large buffer) -- and walk its frame chain from
 * tstate->cframe->current_frame (3.11, 3.12; tstate->current_frame from 3.13)
 * through _PyInterpreterFrame.previous, recording each frame's code object,
 * instruction index and entry flag (3.11's is_entry; from 3.12 the shim
 * frames owned by the C stack are recorded as such, GB_PYFRAME_F_SHIM).
 * Every read is bpf_probe_read_user() of 8 bytes (1 for is_entry) at an
 * offset the layout gives; a read that fails ends the walk.  Bounded loops
 * (GB_MAX_PYTHREADS, GB_MAX_PYFRAMES) the 5.10 verifier accepts.
 */
#ifndef GB_PYFRAMES_BPF_H
#define GB_PYFRAMES_BPF_H

#include "gebpf_events.h"

const volatile bool want_python = false;   /* read Python frames (not --no-python) */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);                    /* tgid */
	__type(value, struct gb_py_layout);
} py_procs SEC(".maps");

static __always_inline __u64 py_read(__u64 addr)
{
	__u64 v = 0;

	if (!addr || bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		return 0;
	return v;
}

/* The PyThreadState of thread tid, 0 if none. */
static __always_inline __u64 py_tstate(const struct gb_py_layout *L, __u32 tid)
{
	__u64 ts = L->tstate_current ? py_read(L->runtime + L->tstate_current) : 0;

	if (ts && py_read(ts + L->ts_native_tid) == tid)
		return ts;
	__u64 interp = py_read(L->runtime + L->interp_head);
	ts = interp ? py_read(interp + L->threads_head) : 0;
	for (int i = 0; i < GB_MAX_PYTHREADS && ts; i++) {
		if (py_read(ts + L->ts_native_tid) == tid)
			return ts;
		ts = py_read(ts + L->ts_next);
	}
	return 0;
}

static __always_inline void py_frames(struct gb_ev_sample_stack *e, __u64 pid_tgid)
{
	__u32 tgid = pid_tgid >> 32;
	const struct gb_py_layout *L;
	__u64 ts, frame;
	int i;

	e->npy = 0;
	e->pystate = 0;
	if (!want_python || !(L = bpf_map_lookup_elem(&py_procs, &tgid)))
		return;
	e->pystate = GB_PYSTATE_PYTHON;
	ts = py_tstate(L, (__u32)pid_tgid);
	if (!ts)
		return;
	e->pystate |= GB_PYSTATE_THREAD;
	frame = L->cframe_current == GB_PY_FRAME_DIRECT ? py_read(ts + L->ts_cframe) :
		py_read(py_read(ts + L->ts_cframe) + L->cframe_current);
	for (i = 0; i < GB_MAX_PYFRAMES && frame; i++) {
		__u64 code = py_read(frame + L->frame_code);
		__u64 instr = py_read(frame + L->frame_prev_instr);
		__u8 flag = 0;
		__u64 first = code + L->code_adaptive;

		if (!code)
			break;
		/* 3.11: is_entry; 3.12 on: the owner, the C stack's for the
		 * shim below each evaluation's first frame (user space drops
		 * the shim and ends the evaluation's frames there). */
		bpf_probe_read_user(&flag, 1, (void *)(frame + (L->frame_owner ? L->frame_owner :
								 L->frame_is_entry)));
		e->py[i].code = code;
		/* Before the first instruction (a frame just pushed): -1. */
		e->py[i].lasti = instr < first || instr - first > 0xfffffffeull ? -1 :
				 (__s32)((instr - first) >> 1);
		e->py[i].flags = L->frame_owner ? (flag == L->owner_cstack ? GB_PYFRAME_F_SHIM : 0) :
				 (flag ? GB_PYFRAME_F_ENTRY : 0);
		frame = py_read(frame + L->frame_previous);
	}
	e->npy = (__u32)i;
	if (frame && i == GB_MAX_PYFRAMES)
		e->pystate |= GB_PYSTATE_DEEP;
}

#endif
