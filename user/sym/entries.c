/* gb_entries_find(): the range is decoded linearly from lo (its
 * instruction boundaries and its calls); the module's executable code is
 * scanned once for direct branches into the range from outside it.  The
 * scan is a byte-pattern pass (gb_flow_scan: every direct branch
 * matches at its opcode byte) and each hit is confirmed by a linear decode
 * from the nearest preceding sync point (a function symbol, an FDE start
 * or the start of the section), skipping one byte past undecodable bytes
 * (data in code), as a linear decode of the whole section from there would
 * see it: the same branches, at a few percent of the decode work. */
#include "sym/entries.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/bound.h"
#include "common/grow.h"
#include "common/log.h"
#include "common/sort.h"
#include "decode/flow.h"
#include "sym/ehframe.h"
#include "sym/elfsyms.h"

struct code {
	uint64_t va;
	const uint8_t *p;
	size_t n;
};

struct scan {
	struct code *code;
	size_t ncode;
	uint64_t *sync;            /* sorted sync points */
	size_t nsync;
	uint64_t *insn;            /* the range's instruction starts, ascending */
	uint8_t *ilen;
	size_t ninsn;
	struct gb_entry *cand;     /* raw entries before merging */
	size_t ncand, capcand;
};

static void warnf(struct gb_entries *en, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	va_start(ap, fmt);
	int r = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (r < 0 || GB_GROW(&en->warn, &en->warn_cap, en->nwarn + 1)) {
		free(r >= 0 ? s : NULL);
		return;
	}
	en->warn[en->nwarn++] = s;
}

static int add(struct scan *sc, uint64_t va, uint32_t why)
{
	if (GB_GROW(&sc->cand, &sc->capcand, sc->ncand + 1))
		return -ENOMEM;
	sc->cand[sc->ncand++] = (struct gb_entry){ .vaddr = va, .why = why };
	return 0;
}

static int cmp_entry(const void *a, const void *b)
{
	return gb_cmp_u64(&((const struct gb_entry *)a)->vaddr, &((const struct gb_entry *)b)->vaddr);
}

/* The executable code of the file: SHF_EXECINSTR sections, or the PF_X
 * segments of a file without section headers. */
static int collect_code(Elf *e, const struct gb_elfsyms *es, struct scan *sc)
{
	size_t fsize = 0;
	const uint8_t *file = (const uint8_t *)elf_rawfile(e, &fsize);
	size_t nscn = 0;
	if (!file || elf_getshdrnum(e, &nscn))
		return -ENOEXEC;
	sc->code = calloc(nscn + es->nloads + 1, sizeof(*sc->code));
	if (!sc->code)
		return -ENOMEM;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    (sh.sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) != (SHF_ALLOC | SHF_EXECINSTR) ||
		    sh.sh_offset > fsize || sh.sh_size > fsize - sh.sh_offset)
			continue;
		sc->code[sc->ncode++] = (struct code){ sh.sh_addr, file + sh.sh_offset, sh.sh_size };
	}
	for (size_t i = 0; !sc->ncode && i < es->nloads; i++) {
		const struct gb_elfload *l = &es->loads[i];
		if (!(l->flags & PF_X) || l->offset > fsize || l->filesz > fsize - l->offset)
			continue;
		sc->code[sc->ncode++] = (struct code){ l->vaddr, file + l->offset, l->filesz };
	}
	return 0;
}

static const struct code *code_at(const struct scan *sc, uint64_t va)
{
	for (size_t i = 0; i < sc->ncode; i++)
		if (va >= sc->code[i].va && va - sc->code[i].va < sc->code[i].n)
			return &sc->code[i];
	return NULL;
}

/* Linear decode of [lo, hi]: instruction starts and return sites. */
static int decode_range(struct scan *sc, const struct code *c, uint64_t lo, uint64_t hi,
			struct gb_entries *en)
{
	size_t cap_insn = 0, cap_ilen = 0;
	for (uint64_t pc = lo; pc <= hi;) {
		struct gb_flow f;
		size_t at = pc - c->va;
		if (gb_flow_decode(pc, c->p + at, c->n - at, &f)) {
			warnf(en, "%#lx: undecodable bytes inside the range (data in code?)",
			      (unsigned long)pc);
			pc++;
			continue;
		}
		if (GB_GROW(&sc->insn, &cap_insn, sc->ninsn + 1) ||
		    GB_GROW(&sc->ilen, &cap_ilen, sc->ninsn + 1))
			return -ENOMEM;
		sc->insn[sc->ninsn] = pc;
		sc->ilen[sc->ninsn++] = f.len;
		if (f.call && pc + f.len <= hi && add(sc, pc + f.len, GB_ENTRY_RETURN))
			return -ENOMEM;
		pc += f.len;
	}
	en->range_insns = sc->ninsn;
	return 0;
}

/* The last sync point <= va inside code c (c's start when none). */
static uint64_t sync_before(const struct scan *sc, const struct code *c, uint64_t va)
{
	size_t lo = GB_UPPER_U64(sc->sync, sc->nsync, va);
	return lo && sc->sync[lo - 1] >= c->va ? sc->sync[lo - 1] : c->va;
}

/* Where the last confirmation's decode stopped: candidates come in
 * ascending order, so one linear decode per sync region serves them all. */
struct cursor {
	uint64_t sync, pc;
};

/* Is there a direct branch to target whose bytes cover va, decoding
 * linearly from the sync point before va? */
static bool confirm(const struct scan *sc, const struct code *c, uint64_t va, uint64_t target,
		    struct cursor *cur)
{
	uint64_t s = sync_before(sc, c, va);
	uint64_t pc = s == cur->sync && cur->pc <= va ? cur->pc : s;
	cur->sync = s;
	while (pc <= va) {
		struct gb_flow f;
		size_t at = pc - c->va;
		if (gb_flow_decode(pc, c->p + at, c->n - at, &f)) {
			pc++;
			continue;
		}
		if (pc + f.len > va) {
			cur->pc = pc;
			return f.direct && f.target == target;
		}
		pc += f.len;
	}
	cur->pc = pc;
	return false;
}

struct scan_ctx {
	struct scan *sc;
	const struct code *c;
	struct cursor cur;
	uint64_t lo, hi;
	struct gb_entries *en;
};

static int on_candidate(void *ctx, uint64_t src, uint64_t target)
{
	struct scan_ctx *x = ctx;
	if (src >= x->lo && src <= x->hi)
		return 0;                       /* inside the range: not an entry */
	x->en->candidates++;
	if (!confirm(x->sc, x->c, src, target, &x->cur))
		return 0;
	x->en->branches++;
	return add(x->sc, target, GB_ENTRY_BRANCH);
}

static int scan_branches(struct scan *sc, uint64_t lo, uint64_t hi, struct gb_entries *en)
{
	for (size_t k = 0; k < sc->ncode; k++) {
		struct scan_ctx x = { sc, &sc->code[k], { UINT64_MAX, 0 }, lo, hi, en };
		en->code_bytes += x.c->n;
		int r = gb_flow_scan(x.c->va, x.c->p, x.c->n, lo, hi, on_candidate, &x);
		if (r)
			return r;
	}
	return 0;
}

static int sync_points(struct scan *sc, const struct gb_elfsyms *es, const struct gb_ehinfo *eh)
{
	sc->sync = malloc((es->nsyms + eh->nfde + 1) * sizeof(*sc->sync));
	if (!sc->sync)
		return -ENOMEM;
	for (size_t i = 0; i < es->nsyms; i++)
		if (es->syms[i].func)
			sc->sync[sc->nsync++] = es->syms[i].value;
	for (size_t i = 0; i < eh->nfde; i++)
		sc->sync[sc->nsync++] = eh->fde_starts[i];
	qsort(sc->sync, sc->nsync, sizeof(*sc->sync), gb_cmp_u64);
	return 0;
}

/* Sort, merge, and keep what is an instruction boundary of the range. */
static int finish(struct scan *sc, const struct code *c, const struct gb_elfsyms *es,
		  struct gb_entries *en)
{
	char why[64];
	qsort(sc->cand, sc->ncand, sizeof(*sc->cand), cmp_entry);
	en->v = calloc(sc->ncand + 1, sizeof(*en->v));
	if (!en->v)
		return -ENOMEM;
	for (size_t i = 0, j = 0; i < sc->ncand; i = j) {
		struct gb_entry e = sc->cand[i];
		for (j = i + 1; j < sc->ncand && sc->cand[j].vaddr == e.vaddr; j++)
			e.why |= sc->cand[j].why;
		uint64_t *hit = sc->ninsn ? bsearch(&e.vaddr, sc->insn, sc->ninsn, sizeof(*sc->insn),
						gb_cmp_u64) : NULL;
		if (!hit) {
			warnf(en, "%#lx (%s) is not an instruction boundary of the range's decode; "
			      "not an entry", (unsigned long)e.vaddr,
			      gb_entry_why_str(e.why, why, sizeof(why)));
			continue;
		}
		if (gb_elfsyms_to_offset(es, e.vaddr, &e.offset)) {
			warnf(en, "%#lx is not backed by the file; not an entry", (unsigned long)e.vaddr);
			continue;
		}
		e.len = sc->ilen[hit - sc->insn];
		memcpy(e.bytes, c->p + (e.vaddr - c->va), e.len);
		en->v[en->n++] = e;
	}
	return 0;
}

/* "gebpf: warning: WHAT: <fmt>" when what is not NULL. */
static void say(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const char *what, const char *fmt, ...)
{
	char why[PATH_MAX + 256];
	va_list ap;
	if (!what)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	gb_warn("%s: %s", what, why);
}

/* The functions ld.so calls from .preinit_array, .init_array and
 * .fini_array (the words the file holds: a PIE's too, where the linker
 * writes each RELATIVE relocation's addend in place) inside (lo, hi]. */
static int init_fini(Elf *e, struct scan *sc, uint64_t lo, uint64_t hi)
{
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_INIT_ARRAY && sh.sh_type != SHT_FINI_ARRAY &&
						 sh.sh_type != SHT_PREINIT_ARRAY) ||
		    !(d = elf_getdata(scn, NULL)) || !d->d_buf)
			continue;
		for (size_t off = 0; off + 8 <= d->d_size; off += 8) {
			uint64_t va;
			memcpy(&va, (const char *)d->d_buf + off, 8);
			if (va > lo && va <= hi && add(sc, va, GB_ENTRY_FUNCTION))
				return -ENOMEM;
		}
	}
	return 0;
}

static int find(const char *path, uint64_t lo, uint64_t hi, struct gb_entries *en,
		const char *what)
{
	struct scan sc = { 0 };
	struct gb_elfsyms es = { 0 };
	struct gb_ehinfo eh = { 0 };
	Elf *e = NULL;
	int r, fd;

	memset(en, 0, sizeof(*en));
	if (hi < lo) {
		say(what, "empty range %#lx-%#lx", (unsigned long)lo, (unsigned long)hi);
		return -EINVAL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		say(what, "%s: %s", path, strerror(errno));
		return r;
	}
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	r = -ENOEXEC;
	if (!e || elf_kind(e) != ELF_K_ELF) {
		say(what, "%s: not an ELF file", path);
		goto cleanup;
	}
	if ((r = gb_elfsyms_read(e, path, &es)) || (r = collect_code(e, &es, &sc)) ||
	    (r = gb_eh_read(e, &eh))) {
		say(what, "%s: %s", path, strerror(-r));
		goto cleanup;
	}
	const struct code *c = code_at(&sc, lo);
	if (!c || hi - c->va >= c->n) {
		say(what, "%#lx-%#lx is not inside one executable section of %s",
			 (unsigned long)lo, (unsigned long)hi, path);
		r = -ERANGE;
		goto cleanup;
	}
	if (eh.nbad)
		warnf(en, "%s: %zu malformed exception-table entries skipped (first: %s)", path,
		      eh.nbad, eh.first_bad);
	r = -ENOMEM;
	if (add(&sc, lo, GB_ENTRY_START) || decode_range(&sc, c, lo, hi, en) ||
	    sync_points(&sc, &es, &eh) || scan_branches(&sc, lo, hi, en))
		goto nomem;
	en->pads = eh.npads;
	for (size_t i = 0; i < eh.npads; i++)
		if (eh.pads[i] >= lo && eh.pads[i] <= hi && add(&sc, eh.pads[i], GB_ENTRY_LANDING))
			goto nomem;
	for (size_t i = 0; i < es.nsyms; i++)
		if (es.syms[i].func && es.syms[i].value > lo && es.syms[i].value <= hi &&
		    add(&sc, es.syms[i].value, GB_ENTRY_SYMBOL))
			goto nomem;
	/* A stripped file has no symbol for most of its functions, yet code
	 * outside the range calls them through pointers (.init_array,
	 * .fini_array, atexit, qsort's comparator) and ld.so jumps to the
	 * entry point: each FDE's start, e_entry and the functions of the
	 * init and fini arrays (crtstuff's have no FDE) are entries too. */
	for (size_t i = 0; i < eh.nfde; i++)
		if (eh.fde_starts[i] > lo && eh.fde_starts[i] <= hi &&
		    add(&sc, eh.fde_starts[i], GB_ENTRY_FUNCTION))
			goto nomem;
	GElf_Ehdr ehdr;
	if (gelf_getehdr(e, &ehdr) && ehdr.e_entry > lo && ehdr.e_entry <= hi &&
	    add(&sc, ehdr.e_entry, GB_ENTRY_FUNCTION))
		goto nomem;
	if (init_fini(e, &sc, lo, hi))
		goto nomem;
	if (finish(&sc, c, &es, en))
		goto nomem;
	r = 0;
	goto cleanup;
nomem:
	say(what, "%s: out of memory", path);
cleanup:
	free(sc.code);
	free(sc.sync);
	free(sc.insn);
	free(sc.ilen);
	free(sc.cand);
	gb_eh_free(&eh);
	gb_elfsyms_free(&es);
	elf_end(e);
	close(fd);
	if (r)
		gb_entries_free(en);
	return r;
}

/* The scan made ahead (gb_entries_prefetch): its file as it was then. */
static struct {
	bool have;
	char path[4096];
	uint64_t lo, hi;
	struct stat st;
	struct gb_entries en;
} memo;

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

static int copy_entries(struct gb_entries *to, const struct gb_entries *from)
{
	*to = *from;
	to->v = malloc((from->n ? from->n : 1) * sizeof(*to->v));
	to->warn = calloc(from->nwarn ? from->nwarn : 1, sizeof(*to->warn));
	to->warn_cap = from->nwarn;
	for (size_t i = 0; to->warn && i < from->nwarn; i++)
		if (!(to->warn[i] = strdup(from->warn[i])))
			to->nwarn = i;
	if (!to->v || !to->warn || to->nwarn != from->nwarn) {
		gb_entries_free(to);
		return -ENOMEM;
	}
	memcpy(to->v, from->v, from->n * sizeof(*to->v));
	return 0;
}

void gb_entries_prefetch(const char *path, uint64_t lo, uint64_t hi)
{
	struct stat st;
	gb_entries_forget();
	if (stat(path, &st) || find(path, lo, hi, &memo.en, NULL))
		return;
	snprintf(memo.path, sizeof(memo.path), "%s", path);
	memo.lo = lo;
	memo.hi = hi;
	memo.st = st;
	memo.have = true;
}

void gb_entries_forget(void)
{
	if (memo.have)
		gb_entries_free(&memo.en);
	memo.have = false;
}

int gb_entries_find(const char *path, uint64_t lo, uint64_t hi, struct gb_entries *en,
		    const char *what)
{
	struct stat st;
	if (memo.have && !strcmp(memo.path, path) && memo.lo == lo && memo.hi == hi &&
	    stat(path, &st) == 0 && same_file(&st, &memo.st) && copy_entries(en, &memo.en) == 0)
		return 0;
	return find(path, lo, hi, en, what);
}

void gb_entries_free(struct gb_entries *en)
{
	for (size_t i = 0; i < en->nwarn; i++)
		free(en->warn[i]);
	free(en->warn);
	free(en->v);
	memset(en, 0, sizeof(*en));
}

const char *gb_entry_why_str(uint32_t why, char *buf, size_t len)
{
	static const char *const names[] = { "start", "return", "branch", "landing-pad", "symbol",
					     "function" };
	size_t at = 0;
	buf[0] = 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		if (why & (1u << i) && at < len)
			at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? "|" : "", names[i]);
	return buf;
}
