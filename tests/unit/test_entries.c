/* gb_entries_find() (user/sym/entries.c) on programs built for it
 * (tests/progs/pt_*), checked against independent decodes of the same
 * bytes; gb_modfile_resolve() and gb_syms__to_file() (user/sym/). */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <criterion/redirect.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "decode/decode.h"
#include "decode/flow.h"
#include "sym/elfsyms.h"
#include "sym/entries.h"
#include "sym/modfile.h"
#include "sym/syms.h"
#include "unit_progs.h"

static void prog_path(const char *name, char *buf, size_t len)
{
	cr_assert(!unit_prog_path(name, buf, len), "%s not built (make progs)", buf);
}

struct file {
	char path[PATH_MAX];
	struct gb_elfsyms es;
	uint8_t *bytes;          /* the whole file */
	size_t size;
};

static void file_open(struct file *f, const char *path)
{
	snprintf(f->path, sizeof(f->path), "%s", path);
	cr_assert_eq(gb_elfsyms_load(path, &f->es), 0, "cannot read %s", path);
	FILE *fp = fopen(path, "rb");
	cr_assert(fp);
	fseek(fp, 0, SEEK_END);
	f->size = (size_t)ftell(fp);
	rewind(fp);
	f->bytes = malloc(f->size);
	cr_assert(f->bytes && fread(f->bytes, 1, f->size, fp) == f->size);
	fclose(fp);
}

static void file_close(struct file *f)
{
	gb_elfsyms_free(&f->es);
	free(f->bytes);
}

static const struct gb_elfsym *sym(struct file *f, const char *name)
{
	const struct gb_elfsym *y = gb_elfsyms_find(&f->es, name);
	cr_assert(y && y->size, "no sized symbol %s in %s", name, f->path);
	return y;
}

static const uint8_t *at(struct file *f, uint64_t va)
{
	uint64_t off;
	cr_assert_eq(gb_elfsyms_to_offset(&f->es, va, &off), 0);
	return f->bytes + off;
}

static const struct gb_entry *entry(const struct gb_entries *en, uint64_t va)
{
	for (size_t i = 0; i < en->n; i++)
		if (en->v[i].vaddr == va)
			return &en->v[i];
	return NULL;
}

static void find(struct file *f, uint64_t lo, uint64_t hi, struct gb_entries *en)
{
	int r = gb_entries_find(f->path, lo, hi, en, "t");
	cr_assert_eq(r, 0, "gb_entries_find failed (see stderr)");
	for (size_t i = 0; i < en->nwarn; i++)
		cr_log_info("warning: %s", en->warn[i]);
	/* Invariants: sorted, unique, inside, file bytes, the start first. */
	cr_assert(en->n >= 1 && en->v[0].vaddr == lo && (en->v[0].why & GB_ENTRY_START));
	for (size_t i = 0; i < en->n; i++) {
		const struct gb_entry *e = &en->v[i];
		cr_assert(e->vaddr >= lo && e->vaddr <= hi);
		cr_assert(i == 0 || en->v[i - 1].vaddr < e->vaddr);
		cr_assert(e->len >= 1 && e->len <= 15);
		cr_assert_arr_eq(e->bytes, f->bytes + e->offset, e->len);
		cr_assert_arr_eq(e->bytes, at(f, e->vaddr), e->len);
	}
}

/* A program's function and its entries. */
struct fix {
	struct file f;
	struct gb_entries en;
	uint64_t lo, hi;          /* the function's inclusive range */
};

static void fix_open(struct fix *x, const char *prog, const char *fn)
{
	char path[PATH_MAX];
	if (prog[0] == '/')
		snprintf(path, sizeof(path), "%s", prog);
	else
		prog_path(prog, path, sizeof(path));
	file_open(&x->f, path);
	const struct gb_elfsym *y = sym(&x->f, fn);
	x->lo = y->value;
	x->hi = y->value + y->size - 1;
	find(&x->f, x->lo, x->hi, &x->en);
}

static void fix_close(struct fix *x)
{
	gb_entries_free(&x->en);
	file_close(&x->f);
}

/* Direct branches of [from, to] (decoded linearly with the full decoder)
 * that land in [lo, hi]: the target of each is checked as a BRANCH entry. */
static int check_branches_into(struct file *f, uint64_t from, uint64_t to, uint64_t lo,
			       uint64_t hi, const struct gb_entries *en)
{
	int seen = 0;
	for (uint64_t pc = from; pc <= to;) {
		struct gb_insn in;
		cr_assert_eq(gb_decode(pc, at(f, pc), 15, &in), 0, "undecodable at %#lx", pc);
		ZyanU64 t;
		if ((pc < lo || pc > hi) && in.zi.operand_count_visible >= 1 &&
		    in.ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && in.ops[0].imm.is_relative &&
		    ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in.zi, &in.ops[0], pc, &t)) &&
		    t >= lo && t <= hi) {
			const struct gb_entry *e = entry(en, t);
			cr_assert(e && (e->why & GB_ENTRY_BRANCH),
				  "the branch at %#lx into the range (to %#lx) is not an entry", pc, t);
			seen++;
		}
		pc += in.len;
	}
	return seen;
}

Test(entries, cold_split_jump_back)
{
	struct fix x;
	fix_open(&x, "pt_cold", "traced");
	/* traced.cold jumps back into the middle of traced. */
	const struct gb_elfsym *c = sym(&x.f, "traced.cold");
	cr_assert_geq(check_branches_into(&x.f, c->value, c->value + c->size - 1, x.lo, x.hi, &x.en),
		      1, "traced.cold has no branch back into traced (not split as expected?)");
	size_t mid = 0;
	for (size_t i = 0; i < x.en.n; i++)
		mid += x.en.v[i].vaddr != x.lo && (x.en.v[i].why & GB_ENTRY_BRANCH);
	cr_assert_geq(mid, 1);
	cr_log_info("pt_cold traced: %zu entries, %zu candidates, %zu branches", x.en.n,
		    x.en.candidates, x.en.branches);
	fix_close(&x);
}

Test(entries, return_sites_of_calls)
{
	struct fix x;
	fix_open(&x, "pt_reenter", "traced");
	int calls = 0;
	for (uint64_t pc = x.lo; pc <= x.hi;) {
		struct gb_insn in;
		cr_assert_eq(gb_decode(pc, at(&x.f, pc), 15, &in), 0);
		if (in.zi.meta.category == ZYDIS_CATEGORY_CALL && pc + in.len <= x.hi) {
			const struct gb_entry *e = entry(&x.en, pc + in.len);
			cr_assert(e && (e->why & GB_ENTRY_RETURN), "no return site after %#lx", pc);
			calls++;
		}
		pc += in.len;
	}
	cr_assert_geq(calls, 1);
	/* Nothing else than the start and the return sites in this one. */
	for (size_t i = 0; i < x.en.n; i++)
		cr_assert(x.en.v[i].why & (GB_ENTRY_START | GB_ENTRY_RETURN), "unexpected entry %#lx",
			  x.en.v[i].vaddr);
	fix_close(&x);
}

Test(entries, cxx_landing_pad)
{
	struct fix x, y;
	fix_open(&x, "pt_except", "traced");
	size_t pads = 0;
	for (size_t i = 0; i < x.en.n; i++)
		if (x.en.v[i].why & GB_ENTRY_LANDING) {
			pads++;
			/* A landing pad is reached by the unwinder only: no call
			 * returns there and the start is not one. */
			cr_assert(!(x.en.v[i].why & (GB_ENTRY_START | GB_ENTRY_RETURN)));
		}
	cr_assert_eq(pads, 1, "traced's catch (int) has one landing pad, found %zu", pads);
	cr_assert_gt(x.en.pads, 1, "the static C++ runtime has many landing pads");
	cr_assert_eq(x.en.nwarn, 0);
	/* thrower has no try: no landing pad in it. */
	fix_open(&y, x.f.path, "_Z7throweri");
	for (size_t i = 0; i < y.en.n; i++)
		cr_assert(!(y.en.v[i].why & GB_ENTRY_LANDING));
	fix_close(&y);
	fix_close(&x);
}

Test(entries, range_cutting_a_function)
{
	struct fix x;
	struct gb_entries en;
	fix_open(&x, "pt_cold", "traced");
	const struct gb_elfsym *c = sym(&x.f, "traced.cold");
	uint64_t end = x.hi, cold_end = c->value + c->size - 1;
	/* The second half of traced, from an instruction boundary. */
	uint64_t pcs[256];
	size_t n = 0;
	for (uint64_t pc = x.lo; pc <= end && n < 256;) {
		struct gb_flow fl;
		cr_assert_eq(gb_flow_decode(pc, at(&x.f, pc), 15, &fl), 0);
		pcs[n++] = pc;
		pc += fl.len;
	}
	uint64_t lo = pcs[n / 2];
	find(&x.f, lo, end, &en);
	/* Branches from the first half and from traced.cold into the second. */
	check_branches_into(&x.f, x.lo, end, lo, end, &en);
	check_branches_into(&x.f, c->value, cold_end, lo, end, &en);
	gb_entries_free(&en);
	/* The first half: loop back-edges from the second half enter it. */
	find(&x.f, x.lo, lo - 1, &en);
	int back = check_branches_into(&x.f, x.lo, end, x.lo, lo - 1, &en);
	cr_log_info("pt_cold traced [%#lx, %#lx]: %zu entries, %d branches in", x.lo, lo - 1,
		    en.n, back);
	gb_entries_free(&en);
	/* A START inside an instruction: the decode starts there. */
	find(&x.f, lo + 1, end, &en);
	gb_entries_free(&en);
	fix_close(&x);
}

/* Entries of module:fn, timed. */
static double scan_ms(const char *module, const char *fn, struct fix *x)
{
	char path[PATH_MAX];
	uint64_t lo, hi;
	struct timespec a, b;
	if (gb_modfile_resolve(module, fn, NULL, path, sizeof(path), &lo, &hi, NULL))
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &a);
	fix_open(x, path, fn);
	clock_gettime(CLOCK_MONOTONIC, &b);
	cr_log_info("%s %s: %zu entries (%zu insns, %zu code bytes, %zu branches in, %zu landing "
		    "pads in the module)", path, fn, x->en.n, x->en.range_insns, x->en.code_bytes,
		    x->en.branches, x->en.pads);
	return (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
}

/* The times include reading the file twice (the test's own copy). */
Test(entries, libc_malloc)
{
	struct fix x;
	double ms = scan_ms("libc", "malloc", &x);
	cr_assert_geq(ms, 0, "libc's malloc not found");
	cr_log_info("libc malloc: %.1f ms", ms);
	cr_assert_gt(x.en.range_insns, 20);
	cr_assert_gt(x.en.n, 2, "malloc calls out: return sites expected");
	cr_assert_gt(x.en.code_bytes, 500000);
	cr_assert_lt(ms, 1000.0, "scan took %.0f ms", ms);
	fix_close(&x);
}

static const struct gb_entry *entry_at(const struct gb_entries *en, uint64_t va)
{
	for (size_t i = 0; i < en->n; i++)
		if (en->v[i].vaddr == va)
			return &en->v[i];
	return NULL;
}

/* A stripped PIE (Debian's sort: no .symtab, a handful of .dynsym
 * functions) over its whole .text: the ELF entry point (ld.so jumps to
 * it), the functions of .init_array and .fini_array (ld.so calls them;
 * crtstuff's frame_dummy has no FDE) and each FDE's start (functions called
 * through pointers) are entries, or the patch and probe traps miss them
 * (the patch trap's trace of sort lacked _start, frame_dummy, its atexit
 * handler and a callback run 30 times, docs/entries.md). */
Test(entries, stripped_pie_functions_entered_from_outside)
{
	const char *path = "/usr/bin/sort";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		cr_skip_test("%s: not installed (coreutils)", path);
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	GElf_Ehdr eh;
	cr_assert(e && gelf_getehdr(e, &eh));
	uint64_t lo = 0, hi = 0, arr[8];
	size_t narr = 0, nstr;
	cr_assert(!elf_getshdrstrndx(e, &nstr));
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
		GElf_Shdr sh;
		cr_assert(gelf_getshdr(scn, &sh));
		const char *nm = elf_strptr(e, nstr, sh.sh_name);
		if (nm && !strcmp(nm, ".text"))
			lo = sh.sh_addr, hi = sh.sh_addr + sh.sh_size - 1;
		if (sh.sh_type == SHT_INIT_ARRAY || sh.sh_type == SHT_FINI_ARRAY) {
			Elf_Data *d = elf_getdata(scn, NULL);
			for (size_t off = 0; d && off + 8 <= d->d_size && narr < 8; off += 8)
				memcpy(&arr[narr++], (const char *)d->d_buf + off, 8);
		}
	}
	elf_end(e);
	close(fd);
	cr_assert(lo && narr >= 2, "sort has .text and init/fini arrays");
	struct gb_entries en;
	cr_assert_eq(gb_entries_find(path, lo, hi, &en, NULL), 0);
	const struct gb_entry *x = entry_at(&en, eh.e_entry);
	cr_assert(x && (x->why & GB_ENTRY_FUNCTION), "the entry point %#lx", (unsigned long)eh.e_entry);
	for (size_t i = 0; i < narr; i++) {
		x = entry_at(&en, arr[i]);
		cr_assert(x && (x->why & GB_ENTRY_FUNCTION), "init/fini function %#lx", (unsigned long)arr[i]);
	}
	size_t nfun = 0;
	for (size_t i = 0; i < en.n; i++)
		nfun += !!(en.v[i].why & GB_ENTRY_FUNCTION);
	cr_assert_gt(nfun, 100, "one per FDE of sort's functions: %zu", nfun);
	char why[64];
	cr_assert_str_eq(gb_entry_why_str(GB_ENTRY_FUNCTION, why, sizeof(why)), "function");
	gb_entries_free(&en);
}

/* The scan made ahead (before an attach stops the target) serves the same
 * range with the same entries, each caller its own copy; another range is
 * scanned afresh. */
Test(entries, a_prefetched_scan_gives_the_same_entries)
{
	char path[PATH_MAX];
	uint64_t lo, hi;
	struct gb_entries fresh, a, b, other;
	cr_assert_eq(gb_modfile_resolve("libc", "malloc", NULL, path, sizeof(path), &lo, &hi, NULL), 0);
	cr_assert_eq(gb_entries_find(path, lo, hi, &fresh, NULL), 0);
	gb_entries_prefetch(path, lo, hi);
	cr_assert_eq(gb_entries_find(path, lo, hi, &a, NULL), 0);
	cr_assert_eq(gb_entries_find(path, lo, hi, &b, NULL), 0);
	cr_assert_eq(a.n, fresh.n);
	cr_assert_eq(a.range_insns, fresh.range_insns);
	cr_assert(!memcmp(a.v, fresh.v, fresh.n * sizeof(*fresh.v)));
	cr_assert_neq(a.v, b.v, "each find gets its own copy");
	gb_entries_free(&a);
	cr_assert(!memcmp(b.v, fresh.v, fresh.n * sizeof(*fresh.v)), "a copy outlives another's free");
	cr_assert_eq(gb_entries_find(path, lo, lo + 15, &other, NULL), 0);
	cr_assert_lt(other.range_insns, fresh.range_insns, "a shorter range is not the memo's");
	gb_entries_forget();
	gb_entries_free(&b);
	gb_entries_free(&other);
	gb_entries_free(&fresh);
}

Test(entries, libpython_scan_time)
{
	struct fix x;
	double ms = scan_ms("libpython3.11.so", "PyObject_Malloc", &x);
	if (ms < 0)
		cr_skip_test("libpython3.11 not installed (Debian: libpython3.11)");
	cr_log_info("libpython PyObject_Malloc: %.1f ms", ms);
	cr_assert_lt(ms, 1000.0);
	fix_close(&x);
}

Test(modfile, resolves_like_the_file)
{
	char path[PATH_MAX], exe[PATH_MAX];
	uint64_t lo, hi;
	cr_assert_eq(gb_modfile_resolve("libc", "malloc", NULL, path, sizeof(path), &lo, &hi,
					"t"), 0);
	cr_assert(strstr(path, "/libc.so.6"), "libc resolved to %s", path);
	struct gb_elfsyms es;
	cr_assert_eq(gb_elfsyms_load(path, &es), 0);
	const struct gb_elfsym *y = gb_elfsyms_find(&es, "malloc");
	cr_assert(y && lo == y->value && hi == y->value + y->size - 1);
	gb_elfsyms_free(&es);
	/* A library found only through the program's RUNPATH ($ORIGIN/lib). */
	prog_path("pt_dlopen", exe, sizeof(exe));
	cr_assert_eq(gb_modfile_resolve("libptdl", "ptdl_work", exe, path, sizeof(path), &lo, &hi,
					"t"), 0);
	cr_assert(strstr(path, "/progs/lib/libptdl.so"), "%s", path);
	cr_assert_neq(gb_modfile_resolve("libptdl", "ptdl_work", NULL, path, sizeof(path), &lo,
					 &hi, NULL), 0, "found without the RUNPATH");
	/* The program itself, by path and by name with its RUNPATH. */
	cr_assert_eq(gb_modfile_resolve(exe, "main", NULL, path, sizeof(path), &lo, &hi, "t"), 0);
	cr_assert_eq(gb_modfile_resolve("pt_dlopen", "main", exe, path, sizeof(path), &lo, &hi,
					"t"), 0);
}

/* Errors say why, in one "gebpf: WHAT: <why>" line each (nothing when
 * what is NULL). */
Test(modfile, errors_say_why, .init = cr_redirect_stderr)
{
	char path[PATH_MAX], out[4096] = "";
	uint64_t lo, hi;
	cr_assert_eq(gb_modfile_resolve("libnosuchthing", "f", NULL, path, sizeof(path), &lo, &hi,
					NULL), -ENOENT);
	cr_assert_eq(gb_modfile_resolve("libnosuchthing", "f", NULL, path, sizeof(path), &lo, &hi,
					"a"), -ENOENT);
	cr_assert_eq(gb_modfile_resolve("libc", "no_such_symbol_here", NULL, path, sizeof(path),
					&lo, &hi, "b"), -ENOENT);
	/* An IFUNC's code is its resolver: refused, with the reason. */
	cr_assert_eq(gb_modfile_resolve("libc", "memcpy", NULL, path, sizeof(path), &lo, &hi, "c"),
		     -EINVAL);
	fflush(stderr);
	size_t n = fread(out, 1, sizeof(out) - 1, cr_get_redirected_stderr());
	out[n] = 0;
	char *a = strstr(out, "gebpf: a: no x86-64 ELF file matches module 'libnosuchthing' in the "
			 "loader's directories\n");
	char *b = strstr(out, "gebpf: b: symbol 'no_such_symbol_here' not found in any file");
	char *c = strstr(out, "gebpf: c: symbol memcpy in ");
	cr_assert(a == out && b && c && strstr(c, " is an IFUNC"), "%s", out);
	int lines = 0;
	for (char *p = out; *p; p++)
		lines += *p == '\n';
	cr_assert_eq(lines, 3, "%s", out);
}

Test(syms, runtime_address_to_file)
{
	char path[PATH_MAX], fpath[PATH_MAX];
	uint64_t va, off, lo, hi;
	void *fn = dlsym(RTLD_DEFAULT, "getpid");
	cr_assert(fn);
	struct gb_syms *s = gb_syms__new(getpid());
	cr_assert(s);
	cr_assert_eq(gb_syms__to_file(s, (uint64_t)(uintptr_t)fn, path, sizeof(path), &va, &off), 0);
	cr_assert_eq(gb_modfile_resolve(path, "getpid", NULL, fpath, sizeof(fpath), &lo,
					&hi, "t"), 0);
	cr_assert_eq(va, lo, "%s: run-time %p is link-time %#lx, the symbol says %#lx", path, fn,
		     (unsigned long)va, (unsigned long)lo);
	/* The file-based resolution names the file as the maps do. */
	cr_assert_eq(gb_modfile_resolve("libc", "getpid", NULL, fpath, sizeof(fpath),
					&lo, &hi, "t"), 0);
	cr_assert_str_eq(fpath, path);
	cr_assert_eq(gb_syms__to_file(s, 8, path, sizeof(path), &va, &off), -ENOENT);
	gb_syms__free(s);
}

/* Bytes [off, off + size) of section name in the file at path. */
static void section_at(const char *path, const char *name, uint64_t *off, uint64_t *size)
{
	int fd = open(path, O_RDONLY);
	cr_assert(fd >= 0);
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	*size = 0;
	cr_assert(e && !elf_getshdrstrndx(e, &shstrndx));
	while ((scn = elf_nextscn(e, scn)))
		if (gelf_getshdr(scn, &sh) && !strcmp(elf_strptr(e, shstrndx, sh.sh_name), name)) {
			*off = sh.sh_offset;
			*size = sh.sh_size;
		}
	elf_end(e);
	close(fd);
	cr_assert(*size, "%s has no %s", path, name);
}

Test(entries, corrupt_exception_tables_are_skipped_not_read_past)
{
	struct fix x;
	char tmp[] = "/tmp/gebpf-entries-XXXXXX";
	uint64_t eh, ehn, gx, gxn;
	fix_open(&x, "pt_except", "traced");
	section_at(x.f.path, ".eh_frame", &eh, &ehn);
	section_at(x.f.path, ".gcc_except_table", &gx, &gxn);
	int fd = mkstemp(tmp);
	cr_assert(fd >= 0);
	uint8_t *copy = malloc(x.f.size);
	cr_assert(copy);
	srand(12345);
	size_t warned = 0;
	for (int round = 0; round < 150; round++) {
		memcpy(copy, x.f.bytes, x.f.size);
		/* A few random bytes of each table, sometimes a run of 0xff. */
		for (int k = 0; k < 1 + round % 6; k++) {
			copy[eh + (uint64_t)rand() % ehn] = (uint8_t)rand();
			copy[gx + (uint64_t)rand() % gxn] = (uint8_t)rand();
		}
		if (round % 10 == 0)
			memset(copy + eh + (uint64_t)rand() % (ehn - 8), 0xff, 8);
		cr_assert(pwrite(fd, copy, x.f.size, 0) == (ssize_t)x.f.size);
		struct gb_entries en;
		int r = gb_entries_find(tmp, x.lo, x.hi, &en, NULL);
		cr_assert(r == 0 || r < 0);
		if (!r) {
			warned += en.nwarn > 0;
			cr_assert(en.n >= 1 && en.v[0].vaddr == x.lo);
			gb_entries_free(&en);
		}
	}
	cr_log_info("150 corrupted copies: %zu with warnings", warned);
	cr_assert_gt(warned, 10, "corruption is reported as warnings");
	close(fd);
	unlink(tmp);
	free(copy);
	fix_close(&x);
}

/* The one resolver of trace --range, sample --range and snap --at: a
 * symbol of this process resolves to where dlsym finds it; an unknown one
 * is one "gebpf: WHAT: pid PID: <why>" line, or nothing when quiet. */
Test(syms, range_resolve, .init = cr_redirect_stderr)
{
	struct gb_range_spec spec, out;
	char text[64], want[256], got[1024] = "";
	void *fn = dlsym(RTLD_DEFAULT, "getpid");
	cr_assert(fn);
	cr_assert_eq(gb_range_parse("t", "libc:getpid", &spec), 0);
	cr_assert_eq(gb_sym_range_resolve(&spec, getpid(), &out, "x"), 0);
	cr_assert(out.kind == GB_RANGE_ADDR && out.has_start && out.has_end);
	cr_assert_eq(out.start, (uint64_t)(uintptr_t)fn);
	cr_assert_gt(out.end, out.start);
	gb_range_describe(&spec, text, sizeof(text));
	cr_assert_str_eq(text, "libc:getpid");
	/* An address spec is copied as it is. */
	cr_assert_eq(gb_range_parse("t", "1000-1fff", &spec), 0);
	cr_assert_eq(gb_sym_range_resolve(&spec, getpid(), &out, "x"), 0);
	cr_assert(out.kind == GB_RANGE_ADDR && out.start == 0x1000 && out.end == 0x1fff);
	cr_assert_eq(gb_range_parse("t", "no_such_symbol_here", &spec), 0);
	cr_assert_eq(gb_sym_range_resolve(&spec, getpid(), &out, NULL), -ENOENT);
	cr_assert_eq(gb_sym_range_resolve(&spec, getpid(), &out, "range no_such_symbol_here"),
		     -ENOENT);
	fflush(stderr);
	size_t n = fread(got, 1, sizeof(got) - 1, cr_get_redirected_stderr());
	got[n] = 0;
	snprintf(want, sizeof(want), "gebpf: range no_such_symbol_here: pid %d: symbol "
		 "'no_such_symbol_here' not found in any mapped module\n", getpid());
	cr_assert_str_eq(got, want);
}
