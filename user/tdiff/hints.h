/* Hints: a divergence whose shape is a documented emulator quirk's
 * (docs/testing.md "Emulator deviations", listed in docs/diff.md "Hints")
 * names the quirk and the --normalise that undoes it, or says that no
 * normalisation does.  A shape is a guess, never a proof: the hint says
 * "has the shape of". */
#ifndef GB_TDIFF_HINTS_H
#define GB_TDIFF_HINTS_H

#include <stdbool.h>
#include <stddef.h>

#include "tdiff/align.h"

enum gb_quirk {
	GB_QUIRK_NONE = 0,
	GB_QUIRK_SPLIT,        /* qemu: >8-byte access as 8-byte pieces */
	GB_QUIRK_SMC,          /* qemu: SMC store logged twice */
	GB_QUIRK_REP_EXEC,     /* lackey: extra exec at a REP loop's end */
	GB_QUIRK_LOCK_READ,    /* lackey: double read of a locked RMW / xchg */
	GB_QUIRK_CMPS,         /* qemu and lackey: CMPS read order */
	GB_QUIRK_BITTEST,      /* lackey: bit-test read as 1 byte */
	GB_QUIRK_GATHER_LANE,  /* lackey: 4-byte reads for masked-off gather lanes */
	GB_QUIRK_MASKMOV,      /* qemu: vmaskmov loads its masked-off bytes */
	GB_QUIRK_CPU_IFUNC,    /* glibc's ifunc picked another variant for the CPU */
	GB_QUIRK_N
};

struct gb_quirk_info {
	const char *name;       /* "qemu-split" */
	const char *what;       /* one sentence */
	const char *normalise;  /* "qemu", "lackey", "qemu or lackey", or NULL: not normalised */
	const char *advice;     /* what to do instead, or NULL */
};

const struct gb_quirk_info *gb_quirk_info(enum gb_quirk q);

/* The divergence: na groups of A from a[0], nb of B from b[0] (only the
 * first two of each are looked at; NULL past the span), the groups just
 * before it (NULL at the start), the instruction's mnemonic from the
 * binary ("" when unknown), and the symbols holding the first pc of a[0]
 * and of b[0] ("name" or "name+0xoff"; NULL when the binary has none) with
 * whether each is an STT_GNU_IFUNC symbol (its code is the resolver). */
struct gb_hint_in {
	const struct gb_tgroup *a[2], *b[2], *prev_a, *prev_b;
	size_t na, nb;
	const struct gb_regions *ra, *rb;
	const struct gb_cmp_opts *o;
	const char *mnem;
	const char *sym_a, *sym_b;
	bool ifunc_a, ifunc_b;
};

/* Are a and b ("name" or "name+0xoff") two of glibc's x86-64 variants of a
 * string or memory function for different CPU features, such as
 * __strlen_evex and __strlen_avx2, or __memmove_avx512_unaligned_erms and
 * __memcpy_avx_unaligned_erms (one address has several names)? */
bool gb_hint_cpu_variants(const char *a, const char *b);

enum gb_quirk gb_hint_find(const struct gb_hint_in *in);

#endif
