#include "sym/ehframe.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"

#define PE_OMIT     0xff
#define PE_FORMAT   0x0f
#define PE_APPL     0x70
#define PE_INDIRECT 0x80
#define PE_PCREL    0x10

/* A bounded reader over bytes that live at link-time vaddr va. */
struct rd {
	const uint8_t *buf, *p, *end;
	uint64_t va;
	bool bad;
};

static bool need(struct rd *r, size_t n)
{
	if (r->bad || (size_t)(r->end - r->p) < n) {
		r->bad = true;
		return false;
	}
	return true;
}

static uint64_t rd_fixed(struct rd *r, size_t n)
{
	uint64_t v = 0;
	if (!need(r, n))
		return 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)r->p[i] << (8 * i);
	r->p += n;
	return v;
}

static uint64_t rd_leb(struct rd *r, bool sign)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;
	do {
		if (!need(r, 1))
			return 0;
		b = *r->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (sign && shift < 64 && (b & 0x40))
		v |= ~0ull << shift;
	return v;
}

static int64_t sext(uint64_t v, unsigned bits)
{
	return (int64_t)(v << (64 - bits)) >> (64 - bits);
}

/* A DW_EH_PE-encoded value: the format part always, the application part
 * (absolute or pc-relative; func-relative with func) when appl is set.
 * *raw gets the value before the application (0 means "none" for LSDAs). */
static uint64_t rd_enc(struct rd *r, uint8_t enc, bool appl, uint64_t func, uint64_t *raw)
{
	uint64_t field = r->va + (uint64_t)(r->p - r->buf), v;
	switch (enc & PE_FORMAT) {
	case 0x00: v = rd_fixed(r, 8); break;               /* absptr */
	case 0x01: v = rd_leb(r, false); break;             /* uleb128 */
	case 0x02: v = rd_fixed(r, 2); break;
	case 0x03: v = rd_fixed(r, 4); break;
	case 0x04: v = rd_fixed(r, 8); break;
	case 0x09: v = rd_leb(r, true); break;              /* sleb128 */
	case 0x0a: v = (uint64_t)sext(rd_fixed(r, 2), 16); break;
	case 0x0b: v = (uint64_t)sext(rd_fixed(r, 4), 32); break;
	case 0x0c: v = rd_fixed(r, 8); break;
	default: r->bad = true; return 0;
	}
	if (raw)
		*raw = v;
	if (!appl)
		return v;
	switch (enc & PE_APPL) {
	case 0x00: return v;
	case PE_PCREL: return v + field;
	case 0x40: return v + func;                         /* funcrel */
	default: r->bad = true; return 0;                   /* textrel/datarel/aligned */
	}
}

struct cie {
	bool ok, z;
	uint8_t fde_enc, lsda_enc;
	bool has_lsda;
};

static void bad(struct gb_ehinfo *eh, const char *fmt, ...)
{
	if (!eh->nbad++) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(eh->first_bad, sizeof(eh->first_bad), fmt, ap);
		va_end(ap);
	}
}

static struct cie parse_cie(struct rd r)
{
	struct cie c = { .fde_enc = 0, .lsda_enc = PE_OMIT };
	uint8_t version = (uint8_t)rd_fixed(&r, 1);
	const char *aug = (const char *)r.p;
	size_t alen = strnlen(aug, (size_t)(r.end - r.p));
	if (r.bad || alen == (size_t)(r.end - r.p))
		return c;
	r.p += alen + 1;
	if (strstr(aug, "eh"))
		rd_fixed(&r, 8);
	rd_leb(&r, false);                      /* code alignment */
	rd_leb(&r, true);                       /* data alignment */
	if (version == 1)
		rd_fixed(&r, 1);                /* return-address register */
	else
		rd_leb(&r, false);
	if (aug[0] == 'z') {
		c.z = true;
		uint64_t n = rd_leb(&r, false);
		if (!need(&r, n))
			return c;
		struct rd a = r;
		a.end = r.p + n;
		for (const char *s = aug + 1; *s && !a.bad; s++) {
			if (*s == 'L') {
				c.lsda_enc = (uint8_t)rd_fixed(&a, 1);
				c.has_lsda = c.lsda_enc != PE_OMIT;
			} else if (*s == 'R') {
				c.fde_enc = (uint8_t)rd_fixed(&a, 1);
			} else if (*s == 'P') {
				uint8_t penc = (uint8_t)rd_fixed(&a, 1);
				rd_enc(&a, penc & ~PE_INDIRECT, false, 0, NULL);
			} else if (*s != 'S' && *s != 'B' && *s != 'G') {
				break;                  /* unknown: the rest is skipped by n */
			}
		}
		if (a.bad)
			return c;
	} else if (aug[0]) {
		return c;                       /* no 'z': unknown layout */
	}
	c.ok = !r.bad;
	return c;
}

/* Section bytes holding [va, va + 1), and how many follow. */
static bool va_bytes(Elf *e, uint64_t va, struct rd *out)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC) || sh.sh_type == SHT_NOBITS ||
		    va < sh.sh_addr || va >= sh.sh_addr + sh.sh_size)
			continue;
		Elf_Data *d = elf_rawdata(scn, NULL);
		if (!d || !d->d_buf || d->d_size != sh.sh_size)
			return false;
		*out = (struct rd){ d->d_buf, (const uint8_t *)d->d_buf + (va - sh.sh_addr),
				    (const uint8_t *)d->d_buf + d->d_size, sh.sh_addr, false };
		return true;
	}
	return false;
}

static int push(uint64_t **v, size_t *n, size_t *cap, uint64_t x)
{
	if (GB_GROW(v, cap, *n + 1))
		return -ENOMEM;
	(*v)[(*n)++] = x;
	return 0;
}

/* Landing pads of the LSDA at lsda for the function starting at func. */
static int parse_lsda(Elf *e, uint64_t lsda, uint64_t func, struct gb_ehinfo *eh)
{
	struct rd r;
	if (!va_bytes(e, lsda, &r)) {
		bad(eh, "LSDA %#lx is not in the file", (unsigned long)lsda);
		return 0;
	}
	uint8_t lpenc = (uint8_t)rd_fixed(&r, 1);
	uint64_t lpstart = lpenc == PE_OMIT ? func : rd_enc(&r, lpenc, true, func, NULL);
	uint8_t ttenc = (uint8_t)rd_fixed(&r, 1);
	if (ttenc != PE_OMIT)
		rd_leb(&r, false);              /* type-table offset */
	uint8_t csenc = (uint8_t)rd_fixed(&r, 1);
	uint64_t cslen = rd_leb(&r, false);
	if (r.bad || !need(&r, cslen)) {
		bad(eh, "LSDA %#lx: truncated header", (unsigned long)lsda);
		return 0;
	}
	struct rd cs = r;
	cs.end = r.p + cslen;
	while (cs.p < cs.end && !cs.bad) {
		rd_enc(&cs, csenc, false, 0, NULL);     /* call-site start */
		rd_enc(&cs, csenc, false, 0, NULL);     /* length */
		uint64_t lp = rd_enc(&cs, csenc, false, 0, NULL);
		rd_leb(&cs, false);                     /* action */
		if (!cs.bad && lp && push(&eh->pads, &eh->npads, &eh->pads_cap, lpstart + lp))
			return -ENOMEM;
	}
	if (cs.bad)
		bad(eh, "LSDA %#lx: malformed call-site table", (unsigned long)lsda);
	return 0;
}

static Elf_Scn *find_section(Elf *e, const char *name, GElf_Shdr *sh)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	if (elf_getshdrstrndx(e, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(e, scn))) {
		const char *n;
		if (gelf_getshdr(scn, sh) && (n = elf_strptr(e, shstrndx, sh->sh_name)) && !strcmp(n, name))
			return scn;
	}
	return NULL;
}

/* The length of the CIE or FDE at r->p: limits r to its body (r->p at the
 * CIE id / CIE pointer field, *idsz its size).  1, 0 for the terminator,
 * -1 when the length is bad. */
static int entry_open(struct rd *r, size_t *idsz)
{
	uint64_t len = rd_fixed(r, 4);
	*idsz = 4;
	if (len == 0 && !r->bad)
		return 0;
	if (len == 0xffffffffu) {
		len = rd_fixed(r, 8);
		*idsz = 8;
	}
	if (r->bad || len < *idsz || len > (uint64_t)(r->end - r->p))
		return -1;
	r->end = r->p + len;
	return 1;
}

int gb_eh_read(Elf *e, struct gb_ehinfo *eh)
{
	memset(eh, 0, sizeof(*eh));
	GElf_Shdr sh;
	Elf_Scn *scn = find_section(e, ".eh_frame", &sh);
	Elf_Data *d = scn && sh.sh_type != SHT_NOBITS ? elf_rawdata(scn, NULL) : NULL;
	if (!d || !d->d_buf)
		return 0;
	const uint8_t *base = d->d_buf, *end = base + d->d_size;
	struct cie last = { 0 };
	const uint8_t *last_at = NULL;

	for (const uint8_t *p = base; end - p >= 4;) {
		struct rd r = { base, p, end, sh.sh_addr, false };
		size_t idsz;
		int h = entry_open(&r, &idsz);
		if (h <= 0) {
			if (h < 0)
				bad(eh, ".eh_frame+%#lx: bad length", (unsigned long)(p - base));
			break;                  /* terminator or garbage */
		}
		const uint8_t *body = r.p;
		uint64_t id = rd_fixed(&r, idsz);
		p = r.end;
		if (id == 0)
			continue;               /* a CIE: parsed when an FDE names it */
		const uint8_t *cp = body - id;  /* CIE pointer: relative to the field */
		if (id > (uint64_t)(body - base) || end - cp < 8) {
			bad(eh, ".eh_frame+%#lx: bad CIE pointer", (unsigned long)(body - base));
			continue;
		}
		if (cp != last_at) {
			struct rd c = { base, cp, end, sh.sh_addr, false };
			size_t cidsz;
			if (entry_open(&c, &cidsz) <= 0) {
				bad(eh, ".eh_frame+%#lx: bad CIE", (unsigned long)(cp - base));
				continue;
			}
			c.p += cidsz;
			last = parse_cie(c);
			last_at = cp;
		}
		if (!last.ok) {
			bad(eh, ".eh_frame+%#lx: unsupported CIE", (unsigned long)(cp - base));
			continue;
		}
		uint64_t start = rd_enc(&r, last.fde_enc, true, 0, NULL);
		rd_enc(&r, last.fde_enc & PE_FORMAT, false, 0, NULL);    /* pc range */
		uint64_t lsda = 0, raw = 0;
		if (last.z) {
			uint64_t n = rd_leb(&r, false);
			if (need(&r, n) && last.has_lsda) {
				struct rd a = r;
				a.end = r.p + n;
				lsda = rd_enc(&a, last.lsda_enc & ~PE_INDIRECT, true, start, &raw);
				if (a.bad)
					r.bad = true;
				else if (raw && (last.lsda_enc & PE_INDIRECT))
					bad(eh, "FDE at %#lx: indirect LSDA pointer not followed",
					    (unsigned long)start), raw = 0;
			}
		}
		if (r.bad) {
			bad(eh, ".eh_frame+%#lx: malformed FDE", (unsigned long)(body - base));
			continue;
		}
		if (push(&eh->fde_starts, &eh->nfde, &eh->fde_cap, start))
			return -ENOMEM;
		if (raw && parse_lsda(e, lsda, start, eh))
			return -ENOMEM;
	}
	return 0;
}

void gb_eh_free(struct gb_ehinfo *eh)
{
	free(eh->fde_starts);
	free(eh->pads);
	memset(eh, 0, sizeof(*eh));
}
