/* gebpf diff by value: values.h. */
#include "tdiff/values.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode/decode.h"
#include "tdiff/align.h"
#include "tdiff/regions.h"

static const struct gb_vkind_info kinds[GB_VK_N] = {
	[GB_VK_CPUID] = { "cpuid", "cpuid answers for the CPU model, and the emulator models another" },
	[GB_VK_RDTSC] = { "rdtsc", "the time stamp counter differs from run to run" },
	[GB_VK_RDRAND] = { "rdrand", "rdrand and rdseed give random numbers" },
	[GB_VK_X87_TRANS] = { "x87-transcendental",
			      "an x87 transcendental (fsin, fcos, fptan, fpatan, f2xm1, fyl2x...): QEMU "
			      "computes it at double precision, the hardware with a 64-bit mantissa" },
	[GB_VK_SYSCALL] = { "syscall", "a syscall: its result is the kernel's (a pid, a time), and "
				       "QEMU user mode leaves rcx and r11 as they were" },
	[GB_VK_UNDEF_FLAGS] = { "undefined-flags",
				"only flags this instruction leaves undefined differ" },
	[GB_VK_X87_FLAGS] = { "x87-flags", "only fstat's exception flags and C1 differ: QEMU leaves "
					    "them clear where the hardware sets them (precision, rounding up)" },
	[GB_VK_ADDR_FLAGS] = { "address-flags",
			       "flags computed from an address (a stack pointer), which lies elsewhere "
			       "on the other side: the same place, other bits" },
	[GB_VK_CARRIED] = { "carried", "the same two values as an earlier divergence: the value "
				       "carried on, not a new difference" },
};

const struct gb_vkind_info *gb_vkind_info(enum gb_vkind k)
{
	return k > GB_VK_NONE && k < GB_VK_N ? &kinds[k] : NULL;
}

enum gb_vkind gb_vkind_parse(const char *name)
{
	for (int k = 1; k < GB_VK_N; k++)
		if (!strcmp(kinds[k].name, name))
			return (enum gb_vkind)k;
	return GB_VK_NONE;
}

/* The value of register name in a regs object's text ({"rax":"0x1",...}):
 * its text (without quotes) and length; NULL when not there. */
static const char *reg_value(const char *obj, const char *name, size_t *len)
{
	size_t nl = strlen(name);
	for (const char *p = obj; p && (p = strchr(p, '"'));) {
		const char *k = p + 1, *ke = strchr(k, '"');
		if (!ke)
			return NULL;
		const char *v = ke + 3; /* ":" */
		const char *ve = ke[1] == ':' && ke[2] == '"' ? strchr(v, '"') : NULL;
		if (!ve)
			return NULL;
		if ((size_t)(ke - k) == nl && !memcmp(k, name, nl)) {
			*len = (size_t)(ve - v);
			return v;
		}
		p = ve + 1;
	}
	return NULL;
}

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h;
}

static void put(struct gb_vdiff *o, const char *what, const char *a, size_t an, const char *b, size_t bn,
		unsigned size)
{
	if (o->n < GB_VDIFF_SHOWN) {
		snprintf(o->d[o->n].what, sizeof(o->d[0].what), "%s", what);
		snprintf(o->d[o->n].a, sizeof(o->d[0].a), "%.*s", (int)an, a);
		snprintf(o->d[o->n].b, sizeof(o->d[0].b), "%.*s", (int)bn, b);
		o->d[o->n].size = size;
	}
	o->n++;
}

static unsigned reg_size(const char *name)
{
	if (!strncmp(name, "st", 2) && name[2] >= '0' && name[2] <= '7')
		return 10;
	if (!strncmp(name, "xmm", 3))
		return 16;
	if (!strncmp(name, "ymm", 3))
		return 32;
	if (!strncmp(name, "zmm", 3))
		return 64;
	if (!strcmp(name, "fstat") || !strcmp(name, "fctrl"))
		return 2;
	if (!strcmp(name, "mxcsr"))
		return 4;
	return 8;
}

static uint64_t hexval(const char *s)
{
	return strtoull(s, NULL, 16);
}

/* The kind every difference of this instruction is (cpuid, rdtsc...). */
static enum gb_vkind insn_kind(const struct gb_insn *in)
{
	if (!in)
		return GB_VK_NONE;
	switch (in->zi.mnemonic) {
	case ZYDIS_MNEMONIC_CPUID: return GB_VK_CPUID;
	case ZYDIS_MNEMONIC_RDTSC: case ZYDIS_MNEMONIC_RDTSCP: return GB_VK_RDTSC;
	case ZYDIS_MNEMONIC_RDRAND: case ZYDIS_MNEMONIC_RDSEED: return GB_VK_RDRAND;
	case ZYDIS_MNEMONIC_SYSCALL: return GB_VK_SYSCALL;
	case ZYDIS_MNEMONIC_FSIN: case ZYDIS_MNEMONIC_FCOS: case ZYDIS_MNEMONIC_FSINCOS:
	case ZYDIS_MNEMONIC_FPTAN: case ZYDIS_MNEMONIC_FPATAN: case ZYDIS_MNEMONIC_F2XM1:
	case ZYDIS_MNEMONIC_FYL2X: case ZYDIS_MNEMONIC_FYL2XP1:
		return GB_VK_X87_TRANS;
	default:
		return GB_VK_NONE;
	}
}

/* The kind of one difference that the instruction's own kind does not
 * cover: flags it leaves undefined, x87 exception flags. */
static enum gb_vkind pair_kind(const struct gb_insn *in, const char *what, uint64_t a, uint64_t b)
{
	const ZydisAccessedFlags *f = in ? in->zi.cpu_flags : NULL;
	if (!strcmp(what, "eflags") && f && f->undefined && !((a ^ b) & ~(uint64_t)f->undefined))
		return GB_VK_UNDEF_FLAGS;
	/* fstat: IE DE ZE OE UE PE (0-5), SF (6), ES (7), C1 (9) */
	if (!strcmp(what, "fstat") && !((a ^ b) & ~0x2ffull))
		return GB_VK_X87_FLAGS;
	return GB_VK_NONE;
}

/* A value rebased as an address: in a region, or within the regions' gap
 * of one (a stack pointer a few bytes past the last slot touched). */
static struct gb_raddr near(const struct gb_regions *rs, uint64_t v)
{
	const struct gb_region *r = gb_regions_find(rs, v);
	for (size_t i = 0; !r && i < rs->n; i++) {
		const struct gb_region *x = &rs->v[i];
		if (v + rs->gap >= x->lo && v <= x->hi + rs->gap && v + rs->gap > v)
			r = x;
	}
	if (!r)
		return (struct gb_raddr){ 0, (int64_t)v };
	return (struct gb_raddr){ r->index + 1, (int64_t)(v - r->anchor) };
}

/* Two values of at most 8 bytes that are the same place of the same
 * region on their sides (a stack address: QEMU's stack is elsewhere). */
static bool same_place(const char *a, size_t an, const char *b, size_t bn, unsigned size,
		       const struct gb_regions *ra, const struct gb_regions *rb)
{
	if (!ra || !rb || size > 8 || an > 18 || bn > 18)
		return false;
	char x[20], y[20];
	snprintf(x, sizeof(x), "%.*s", (int)an, a);
	snprintf(y, sizeof(y), "%.*s", (int)bn, b);
	struct gb_raddr p = near(ra, strtoull(x, NULL, 16)), q = near(rb, strtoull(y, NULL, 16));
	return p.region && p.region == q.region && p.off == q.off;
}

unsigned gb_values_compare(const struct gb_tgroup *x, const struct gb_tgroup *y,
			   const struct gb_insn *insn, const struct gb_regions *ra,
			   const struct gb_regions *rb, struct gb_vmemory *mem, struct gb_vdiff *o)
{
	memset(o, 0, sizeof(*o));
	uint64_t hs[GB_VDIFF_SHOWN];
	bool rebased = false;   /* a register both wrote is one address, other bits */
	for (size_t i = 0; i < x->n && i < y->n; i++) {
		const struct gb_trec *a = &x->r[i], *b = &y->r[i];
		if (a->regs && b->regs) {
			o->any_values = true;
			/* Every register A names that B names too. */
			for (const char *p = a->regs; (p = strchr(p, '"'));) {
				const char *k = p + 1, *ke = strchr(k, '"');
				if (!ke || ke[1] != ':')
					break;
				char name[16];
				snprintf(name, sizeof(name), "%.*s", (int)(ke - k), k);
				size_t an, bn;
				const char *av = reg_value(a->regs, name, &an), *bv = reg_value(b->regs, name, &bn);
				p = av ? av + an + 1 : ke + 1;
				if (!av || !bv || (an == bn && !memcmp(av, bv, an)))
					continue;
				if (same_place(av, an, bv, bn, reg_size(name), ra, rb)) {
					rebased = true;
					continue;
				}
				if (o->n < GB_VDIFF_SHOWN)
					hs[o->n] = fnv(fnv(0xcbf29ce484222325ull, av, an), bv, bn);
				put(o, name, av, an, bv, bn, reg_size(name));
			}
		}
		if (a->val && b->val) {
			o->any_values = true;
			if (strcmp(a->val, b->val) &&
			    !same_place(a->val, strlen(a->val), b->val, strlen(b->val),
					(unsigned)a->l.size, ra, rb)) {
				char what[24];
				snprintf(what, sizeof(what), "%s %zu", gb_tline_names[a->l.type], i);
				if (o->n < GB_VDIFF_SHOWN)
					hs[o->n] = fnv(fnv(0xcbf29ce484222325ull, a->val, strlen(a->val)), b->val,
						       strlen(b->val));
				put(o, what, a->val, strlen(a->val), b->val, strlen(b->val), (unsigned)a->l.size);
			}
		}
	}
	if (!o->n)
		return 0;
	enum gb_vkind ik = insn_kind(insn);
	o->all_kinds = o->n <= GB_VDIFF_SHOWN;
	for (unsigned d = 0; d < o->n && d < GB_VDIFF_SHOWN; d++) {
		enum gb_vkind k = ik;
		if (!k)
			k = pair_kind(insn, o->d[d].what, hexval(o->d[d].a), hexval(o->d[d].b));
		if (!k && rebased && !strcmp(o->d[d].what, "eflags"))
			k = GB_VK_ADDR_FLAGS;
		if (mem) {
			/* Carried: this pair of values was one before. */
			bool seen = false;
			for (unsigned j = 0; j < 16; j++)
				seen |= mem->h[j] == hs[d];
			if (!seen)
				mem->h[mem->next++ % 16] = hs[d];
			else if (!k)
				k = GB_VK_CARRIED;
		}
		o->d[d].kind = k;
		o->all_kinds &= k != GB_VK_NONE;
	}
	return o->n;
}

/* The hex text's bytes, little-endian, into b (n bytes, zero-extended). */
static void bytes_of(const char *hex, uint8_t *b, size_t n)
{
	memset(b, 0, n);
	if (!strncmp(hex, "0x", 2))
		hex += 2;
	size_t len = strlen(hex);
	for (size_t i = 0; i < len && i / 2 < n; i++) {
		char c = hex[len - 1 - i];
		unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 0;
		b[i / 2] |= (uint8_t)(d << (4 * (i & 1)));
	}
}

static bool ends(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !strcmp(s + n - m, suffix);
}

static void flags_text(uint64_t v, char *buf, size_t len)
{
	static const struct { int bit; const char *name; } f[] = {
		{ 0, "CF" }, { 2, "PF" }, { 4, "AF" }, { 6, "ZF" }, { 7, "SF" }, { 8, "TF" },
		{ 9, "IF" }, { 10, "DF" }, { 11, "OF" }, { 16, "RF" }, { 18, "AC" }, { 21, "ID" },
	};
	int n = snprintf(buf, len, "flags");
	for (size_t k = 0; k < sizeof(f) / sizeof(*f); k++)
		if (v >> f[k].bit & 1)
			n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, " %s", f[k].name);
}

/* n floating-point lanes of w bytes (8: double, 4: float); one is shown
 * bare ("double 1.5"), more as a list ("2 x double [1.5, 2]"). */
static void lanes(char *buf, size_t len, const uint8_t *b, unsigned w, unsigned n)
{
	const char *t = w == 8 ? "double" : "float";
	int k = n == 1 ? snprintf(buf, len, "%s ", t) : snprintf(buf, len, "%u x %s [", n, t);
	for (unsigned i = 0; i < n && i < 16; i++) {
		double d;
		if (w == 8) {
			memcpy(&d, b + 8 * i, 8);
		} else {
			float f;
			memcpy(&f, b + 4 * i, 4);
			d = f;
		}
		k += snprintf(buf + k, len > (size_t)k ? len - (size_t)k : 0, w == 8 ? "%s%.17g" : "%s%.9g",
			      i ? ", " : "", d);
	}
	if (n > 1)
		snprintf(buf + k, len > (size_t)k ? len - (size_t)k : 0, "]");
}

void gb_values_typed(const char *what, const char *hex, unsigned size, const char *mnem, char *buf,
		     size_t len)
{
	uint8_t b[64];
	bytes_of(hex, b, sizeof(b));
	buf[0] = 0;
	mnem = mnem ? mnem : "";
	bool x87 = mnem[0] == 'f' && strncmp(mnem, "fx", 2);
	if (!strcmp(what, "eflags")) {
		flags_text(hexval(hex), buf, len);
	} else if (!strcmp(what, "mxcsr")) {
		static const char *const e[] = { "IE", "DE", "ZE", "OE", "UE", "PE" };
		uint64_t v = hexval(hex);
		int n = snprintf(buf, len, "mxcsr");
		for (int k = 0; k < 6; k++)
			if (v >> k & 1)
				n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, " %s", e[k]);
		snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, ", rounding %u", (unsigned)(v >> 13 & 3));
	} else if (!strcmp(what, "fstat")) {
		uint64_t v = hexval(hex);
		snprintf(buf, len, "top %u, C3 %u C2 %u C1 %u C0 %u%s", (unsigned)(v >> 11 & 7),
			 (unsigned)(v >> 14 & 1), (unsigned)(v >> 10 & 1), (unsigned)(v >> 9 & 1),
			 (unsigned)(v >> 8 & 1), v & 0x3f ? ", exceptions" : "");
	} else if (size == 10) {
		long double d;
		memcpy(&d, b, 10);
		snprintf(buf, len, "x87 %.21Lg", d);
	} else if (size >= 16 && (ends(mnem, "sd") || ends(mnem, "ss"))) {
		/* a scalar: the low lane */
		lanes(buf, len, b, ends(mnem, "sd") ? 8 : 4, 1);
	} else if (size >= 16 && (ends(mnem, "pd") || ends(mnem, "ps"))) {
		lanes(buf, len, b, ends(mnem, "pd") ? 8 : 4, size / (ends(mnem, "pd") ? 8 : 4));
	} else if (size >= 16) {
		int n = snprintf(buf, len, "%u x i32 [", size / 4);
		for (unsigned k = 0; k < size / 4 && k < 16; k++) {
			int32_t v;
			memcpy(&v, b + 4 * k, 4);
			n += snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, "%s%" PRId32, k ? ", " : "", v);
		}
		snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, "]");
	} else if (size == 8 && (x87 || ends(mnem, "sd") || ends(mnem, "pd"))) {
		lanes(buf, len, b, 8, 1);
	} else if (size == 4 && (x87 || ends(mnem, "ss") || ends(mnem, "ps"))) {
		lanes(buf, len, b, 4, 1);
	} else if (size <= 8) {
		int64_t v;
		memcpy(&v, b, 8);
		if (size < 8 && size) /* sign-extend from its width */
			v = (int64_t)((uint64_t)v << (64 - 8 * size)) >> (64 - 8 * size);
		snprintf(buf, len, "%" PRId64, v);
	}
}
