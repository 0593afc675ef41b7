/* gebpf diff by value (docs/diff.md "Values"): two instruction groups that
 * agree in shape (the same pc, the same accesses) compared by the values
 * --values gave them: the registers each side says the instruction wrote
 * (those both sides name) and each access's value (where both have one).
 * Each difference is shown also as the instruction's own type (a double,
 * an x87 extended, packed lanes, flags by name), and a difference that is
 * an emulator's known nature gets a kind (cpuid's model, the time stamp
 * counter, random numbers, an x87 transcendental, a syscall, flags the
 * instruction leaves undefined, x87 exception flags, flags computed from an
 * address that lies elsewhere on the other side, a value carried from an
 * earlier divergence), each difference its own, which --ignore-values
 * can leave out. */
#ifndef GB_TDIFF_VALUES_H
#define GB_TDIFF_VALUES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tdiff/group.h"

struct gb_insn;

enum gb_vkind {
	GB_VK_NONE = 0,
	GB_VK_CPUID,
	GB_VK_RDTSC,
	GB_VK_RDRAND,
	GB_VK_X87_TRANS,
	GB_VK_SYSCALL,
	GB_VK_UNDEF_FLAGS,
	GB_VK_X87_FLAGS,
	GB_VK_ADDR_FLAGS,
	GB_VK_CARRIED,
	GB_VK_N
};

struct gb_vkind_info {
	const char *name;   /* "x87-transcendental": --ignore-values' word */
	const char *what;   /* one sentence */
};
const struct gb_vkind_info *gb_vkind_info(enum gb_vkind k);
/* The kind named name; GB_VK_NONE when none is. */
enum gb_vkind gb_vkind_parse(const char *name);

#define GB_VDIFF_SHOWN 8

struct gb_vdiff {
	unsigned n;                 /* differences (registers and accesses) */
	struct {
		char what[24];          /* "st0", "read 1", "write 2" */
		char a[160], b[160];    /* the values ("0x..."), cut if longer */
		unsigned size;          /* bytes */
		enum gb_vkind kind;     /* what this difference is known to be, or NONE */
	} d[GB_VDIFF_SHOWN];
	/* Every difference is of a kind (more than GB_VDIFF_SHOWN: never). */
	bool all_kinds;
	bool any_values;            /* both sides had values to compare */
};

/* Memory of earlier divergences' pairs of values (the carried kind). */
struct gb_vmemory {
	uint64_t h[16];
	unsigned next;
};

struct gb_regions;

/* Compare x (A) and y (B); insn: the instruction decoded (NULL when the
 * binary is not known: no kind that needs it); ra, rb: the sides' regions
 * (NULL: no rebasing), in which two values of 8 bytes or less that are
 * addresses at the same offset of the same region compare equal.  The
 * count of differences. */
unsigned gb_values_compare(const struct gb_tgroup *x, const struct gb_tgroup *y,
			   const struct gb_insn *insn, const struct gb_regions *ra,
			   const struct gb_regions *rb, struct gb_vmemory *mem, struct gb_vdiff *out);

/* A value (hex text) of `what` (a register's name, or an access) of size
 * bytes, as the instruction's own type: "double 1.4142135623730951",
 * "x87 0.479425538604203000273", "flags ZF PF IF", "4 x i32 [1, 2, 3, 4]",
 * "-1".  mnem: the instruction's mnemonic ("" when unknown). */
void gb_values_typed(const char *what, const char *hex, unsigned size, const char *mnem, char *buf,
		     size_t len);

#endif
