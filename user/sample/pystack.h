/* Python frames in the native stacks of `gebpf sample`: which sampled
 * processes are Python (registered with the sampler so that its BPF program
 * reads their frame chains), and the merge of a sample's Python frames into
 * its unwound native frames.  docs/sample.md "Python frames".
 *
 * A process is looked at on its first sample (or before sampling starts,
 * gb_pystacks__look(): -p targets): pyruntime.h finds and checks its
 * runtime.  Not Python: looked at again after 20, 40, 80 ... ms for 5 s
 * (ld.so maps libpython after the exec), then nothing more (said under
 * -v); a libpython dlopen'ed later than that is not seen.  An interpreter not
 * initialized yet (a command just launched): looked at again on its
 * samples, every 20 ms, for up to 5 s.  A Python gebpf cannot read (another
 * version, a failed check, still not initialized after 5 s): one warning
 * naming the pid and why, and native stacks.
 *
 * The merge: walking the native frames innermost first, each frame inside
 * _PyEval_EvalFrameDefault is replaced by the Python frames that C call
 * runs: the next Python frames up to and including the next entry frame
 * (is_entry: the frame the call was made for; the calls it made from
 * Python run in the same C frame).  Native frames below (C extensions,
 * libcrypto) and above stay where they are.  Python frames left when the
 * native walk ends (a truncated walk) are the callers it did not reach:
 * they go outermost.  A Python frame whose code object cannot be named
 * (freed since the sample, or the process exited before its sample was
 * read) is left out; when none of a C frame's Python frames can be named,
 * the _PyEval_EvalFrameDefault frame stays.
 *
 *   struct gb_pystacks *ps = gb_pystacks__new(sampler);
 *   n = gb_pystacks__merge(ps, sample, pcs, npcs, frames, max);
 *   gb_pystacks__free(ps);
 */
#ifndef GB_SAMPLE_PYSTACK_H
#define GB_SAMPLE_PYSTACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "probe/sampler.h"
#include "sample/profile.h"

struct gb_pystacks;

struct gb_pystacks *gb_pystacks__new(struct gb_sampler *smp);   /* NULL on ENOMEM */
void gb_pystacks__free(struct gb_pystacks *ps);

/* Look at pid now (registers it when it is a Python gebpf reads). */
void gb_pystacks__look(struct gb_pystacks *ps, pid_t pid);

/* Merge sample s's Python frames into its native frames pcs[0..n)
 * (innermost first, pcs[0] the pc) into out[0..max).  Returns the number
 * of frames. */
size_t gb_pystacks__merge(struct gb_pystacks *ps, const struct gb_sample *s,
			  const uint64_t *pcs, size_t n, struct gb_profile_frame *out,
			  size_t max);

struct gb_pystacks_stats {
	uint64_t procs;            /* Python processes registered */
	uint64_t samples;          /* samples that got Python frames */
	uint64_t frames;           /* Python frames placed */
	uint64_t unnamed;          /* Python frames left out (no code object) */
};
void gb_pystacks__stats(const struct gb_pystacks *ps, struct gb_pystacks_stats *st);

#endif
