/* gebpf diff of traces (user/tdiff, user/record/treader.c, tline.c): region
 * clustering and rebasing, resynchronisation, the shapes of the quirk
 * hints, and reading plain, zstd (concatenated, skippable, cut short) and
 * piped traces. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ZSTD_STATIC_LINKING_ONLY   /* ZSTD_writeSkippableFrame */
#include <zstd.h>

#include "record/tline.h"
#include "record/treader.h"
#include "tdiff/align.h"
#include "tdiff/group.h"
#include "tdiff/hints.h"
#include "tdiff/regions.h"
#include "tdiff/stream.h"

/* ---- regions ---- */

Test(tdiff_regions, clusters_by_gap_anchored_at_first_touch)
{
	struct gb_regions rs;
	gb_regions_init(&rs, GB_REGION_GAP);
	/* pc, stack, pc, heap, stack further down, pc: three regions. */
	uint64_t touches[] = { 0x401000, 0x7fffffffe490, 0x401004, 0x4c0000, 0x7fffffffd000, 0x401100 };
	for (size_t i = 0; i < sizeof(touches) / sizeof(touches[0]); i++)
		cr_assert_eq(gb_regions_touch(&rs, touches[i]), 0);
	gb_regions_finish(&rs);
	cr_assert_eq(rs.n, 2, "0x401000 and 0x4c0000 are within 1 MiB: one region; the stack another");
	const struct gb_region *img = gb_regions_find(&rs, 0x4c0000), *stk = gb_regions_find(&rs, 0x7fffffffd000);
	cr_assert(img && stk);
	cr_assert_eq(img->index, 0);
	cr_assert_eq(img->anchor, 0x401000);
	cr_assert_eq(stk->index, 1);
	cr_assert_eq(stk->anchor, 0x7fffffffe490, "anchored at the first touch, not the lowest address");
	cr_assert_null(gb_regions_find(&rs, 0x500000), "never touched");
	gb_regions_free(&rs);
}

Test(tdiff_regions, a_touch_bridging_two_regions_merges_them)
{
	struct gb_regions rs;
	gb_regions_init(&rs, 0x1000);
	cr_assert_eq(gb_regions_touch(&rs, 0x10000), 0);
	cr_assert_eq(gb_regions_touch(&rs, 0x12000), 0);   /* 0x2000 away: a second region */
	cr_assert_eq(rs.n, 2);
	cr_assert_eq(gb_regions_touch(&rs, 0x11000), 0);   /* within 0x1000 of both */
	gb_regions_finish(&rs);
	cr_assert_eq(rs.n, 1);
	cr_assert_eq(rs.v[0].lo, 0x10000);
	cr_assert_eq(rs.v[0].hi, 0x12000);
	cr_assert_eq(rs.v[0].anchor, 0x10000, "the earlier first touch wins");
	gb_regions_free(&rs);
}

Test(tdiff_regions, same_program_other_loader_rebases_equal)
{
	/* The same touches, the stack at QEMU's place in B. */
	struct gb_regions a, b;
	gb_regions_init(&a, GB_REGION_GAP);
	gb_regions_init(&b, GB_REGION_GAP);
	int64_t offs[] = { 0, -8, -16, 0x40, -0x1000 };
	for (int i = 0; i < 5; i++) {
		cr_assert_eq(gb_regions_touch(&a, 0x401000 + 4 * (uint64_t)i), 0);
		cr_assert_eq(gb_regions_touch(&b, 0x401000 + 4 * (uint64_t)i), 0);
		cr_assert_eq(gb_regions_touch(&a, 0x7fffffffe490 + (uint64_t)offs[i]), 0);
		cr_assert_eq(gb_regions_touch(&b, 0x40008004d0 + (uint64_t)offs[i]), 0);
	}
	gb_regions_finish(&a);
	gb_regions_finish(&b);
	for (int i = 0; i < 5; i++) {
		struct gb_raddr x = gb_rebase(&a, 0x7fffffffe490 + (uint64_t)offs[i]);
		struct gb_raddr y = gb_rebase(&b, 0x40008004d0 + (uint64_t)offs[i]);
		cr_assert_eq(x.region, y.region);
		cr_assert_eq(x.off, y.off);
		cr_assert_eq(x.off, offs[i]);
	}
	struct gb_raddr x = gb_rebase(&a, 0x7fffffffe498), y = gb_rebase(&b, 0x40008004d0);
	cr_assert(x.off != y.off, "a real difference stays one");
	gb_regions_free(&a);
	gb_regions_free(&b);
}

Test(tdiff_regions, named_from_maps)
{
	struct gb_regions rs;
	gb_regions_init(&rs, GB_REGION_GAP);
	gb_regions_touch(&rs, 0x401000);
	gb_regions_touch(&rs, 0x7fffffffe490);
	gb_regions_finish(&rs);
	gb_regions_name(&rs, "00400000-00402000 r-xp 00000000 08:01 123 /usr/bin/prog\n"
			     "7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0                          [stack]\n");
	cr_assert_str_eq(gb_regions_find(&rs, 0x401000)->name, "prog");
	cr_assert_str_eq(gb_regions_find(&rs, 0x7fffffffe490)->name, "[stack]");
	gb_regions_free(&rs);
}

/* ---- traces in files ---- */

static char *tmpfile_with(const char *text)
{
	char *path = strdup("/tmp/gb-tdiff-XXXXXX");
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

#define EX(pc, vt) "{\"t\":\"exec\",\"vcpu\":0,\"pc\":\"" pc "\",\"vt\":" #vt "}\n"
#define RD(addr, size, pc, vt) \
	"{\"t\":\"read\",\"vcpu\":0,\"addr\":\"" addr "\",\"size\":" #size ",\"pc\":\"" pc "\",\"vt\":" #vt "}\n"

struct side_fx {
	char *path;
	struct gb_treader *rd;
	struct gb_tgroups *gs;
	struct gb_tside s;
};

static const struct gb_cmp_opts raw_cmp = { .rebase = false };

static void side_open(struct side_fx *f, const char *text)
{
	f->path = tmpfile_with(text);
	cr_assert_eq(gb_treader__open(f->path, 0, "test", &f->rd), 0);
	f->gs = gb_tgroups__new(f->rd, GB_NORM_NONE, NULL);
	cr_assert(f->gs);
	cr_assert_eq(gb_tside_init(&f->s, f->gs, NULL, 64), 0);
	cr_assert_eq(gb_tside_fill(&f->s, 64, &raw_cmp), 0);
}

static void side_close(struct side_fx *f)
{
	gb_tside_free(&f->s);
	gb_tgroups__free(f->gs);
	gb_treader__free(f->rd);
	unlink(f->path);
	free(f->path);
}

Test(tdiff_align, groups_are_an_exec_and_its_accesses)
{
	struct side_fx a;
	side_open(&a, EX("0x10", 0) RD("0x100", 8, "0x10", 0) RD("0x108", 8, "0x10", 0) EX("0x14", 1)
		      "{\"t\":\"summary\",\"insns\":2}\n");
	cr_assert_eq(a.s.count, 3);
	cr_assert_eq(gb_tside_at(&a.s, 0)->n, 3);
	cr_assert_eq(gb_tside_at(&a.s, 1)->n, 1);
	cr_assert(!gb_tgroup_is_insn(gb_tside_at(&a.s, 2)), "the summary is a group of its own");
	side_close(&a);
}

Test(tdiff_align, resync_after_one_changed_access)
{
	struct side_fx a, b;
	side_open(&a, EX("0x10", 0) RD("0x100", 8, "0x10", 0) EX("0x14", 1) RD("0x200", 4, "0x14", 1)
		      EX("0x18", 2) EX("0x1c", 3) EX("0x20", 4));
	side_open(&b, EX("0x10", 0) RD("0x100", 8, "0x10", 0) EX("0x14", 1) RD("0x208", 4, "0x14", 1)
		      EX("0x18", 2) EX("0x1c", 3) EX("0x20", 4));
	gb_tside_pop(&a.s, 1);
	gb_tside_pop(&b.s, 1);
	size_t da, db;
	cr_assert(gb_resync(&a.s, &b.s, 64, 3, &raw_cmp, &da, &db));
	cr_assert_eq(da, 1);
	cr_assert_eq(db, 1);
	side_close(&a);
	side_close(&b);
}

Test(tdiff_align, resync_over_missing_instructions)
{
	struct side_fx a, b;
	/* B lacks the two instructions at 0x14 and 0x18. */
	side_open(&a, EX("0x10", 0) EX("0x14", 1) EX("0x18", 2) EX("0x1c", 3) EX("0x20", 4) EX("0x24", 5));
	side_open(&b, EX("0x10", 0) EX("0x1c", 1) EX("0x20", 2) EX("0x24", 3));
	gb_tside_pop(&a.s, 1);
	gb_tside_pop(&b.s, 1);
	size_t da, db;
	cr_assert(gb_resync(&a.s, &b.s, 64, 3, &raw_cmp, &da, &db));
	cr_assert_eq(da, 2);
	cr_assert_eq(db, 0);
	side_close(&a);
	side_close(&b);
}

Test(tdiff_align, resync_needs_k_agreeing_groups)
{
	/* A loop body x y repeated: a single agreeing group inside the
	 * difference must not be taken for the resync point. */
	struct side_fx a, b;
	side_open(&a, EX("0x1", 0) EX("0x2", 1) EX("0x9", 2) EX("0x3", 3) EX("0x4", 4) EX("0x5", 5)
		      EX("0x6", 6));
	side_open(&b, EX("0x7", 0) EX("0x2", 1) EX("0x8", 2) EX("0x3", 3) EX("0x4", 4) EX("0x5", 5)
		      EX("0x6", 6));
	size_t da, db;
	cr_assert(gb_resync(&a.s, &b.s, 64, 3, &raw_cmp, &da, &db));
	cr_assert_eq(da, 3, "not 1: 0x2 agrees alone, then 0x9 vs 0x8 differ");
	cr_assert_eq(db, 3);
	side_close(&a);
	side_close(&b);
}

Test(tdiff_align, no_resync_within_the_window)
{
	struct side_fx a, b;
	side_open(&a, EX("0x1", 0) EX("0x2", 1) EX("0x3", 2) EX("0x4", 3) EX("0x5", 4));
	side_open(&b, EX("0x11", 0) EX("0x12", 1) EX("0x13", 2) EX("0x4", 3) EX("0x5", 4));
	size_t da, db;
	cr_assert(!gb_resync(&a.s, &b.s, 2, 3, &raw_cmp, &da, &db), "the agreement is past a window of 2");
	cr_assert(gb_resync(&a.s, &b.s, 64, 3, &raw_cmp, &da, &db));
	cr_assert_eq(da, 3, "with a wide window: the common end");
	side_close(&a);
	side_close(&b);
}

/* ---- hints ---- */

static struct gb_tgroup group_of(const char *text, struct side_fx *f)
{
	side_open(f, text);
	cr_assert_geq(f->s.count, 1);
	return *gb_tside_at(&f->s, 0);
}

static enum gb_quirk hint_pair(const char *ta, const char *tb, const char *mnem)
{
	struct side_fx fa, fb;
	struct gb_tgroup a = group_of(ta, &fa), b = group_of(tb, &fb);
	struct gb_hint_in in = { .a = { &a }, .b = { &b }, .na = 1, .nb = 1, .o = &raw_cmp, .mnem = mnem };
	enum gb_quirk q = gb_hint_find(&in);
	side_close(&fa);
	side_close(&fb);
	return q;
}

Test(tdiff_hints, qemu_split_16_byte_read)
{
	cr_assert_eq(hint_pair(EX("0x10", 0) RD("0x100", 16, "0x10", 0),
			       EX("0x10", 0) RD("0x100", 8, "0x10", 0) RD("0x108", 8, "0x10", 0), ""),
		     GB_QUIRK_SPLIT);
	/* Pieces that do not tile the access are no split. */
	cr_assert_eq(hint_pair(EX("0x10", 0) RD("0x100", 16, "0x10", 0),
			       EX("0x10", 0) RD("0x100", 8, "0x10", 0) RD("0x110", 8, "0x10", 0), ""),
		     GB_QUIRK_NONE);
	cr_assert_str_eq(gb_quirk_info(GB_QUIRK_SPLIT)->normalise, "qemu");
}

Test(tdiff_hints, lackey_lock_read_and_cmps_order)
{
	cr_assert_eq(hint_pair(EX("0x10", 0) RD("0x100", 8, "0x10", 0),
			       EX("0x10", 0) RD("0x100", 8, "0x10", 0) RD("0x100", 8, "0x10", 0), ""),
		     GB_QUIRK_LOCK_READ);
	cr_assert_eq(hint_pair(EX("0x10", 0) RD("0x500", 1, "0x10", 0) RD("0x300", 1, "0x10", 0),
			       EX("0x10", 0) RD("0x300", 1, "0x10", 0) RD("0x500", 1, "0x10", 0), ""),
		     GB_QUIRK_CMPS);
}

#define WR(addr, size, pc, vt) \
	"{\"t\":\"write\",\"vcpu\":0,\"addr\":\"" addr "\",\"size\":" #size ",\"pc\":\"" pc "\",\"vt\":" #vt "}\n"

Test(tdiff_hints, qemu_smc_store_twice)
{
	cr_assert_eq(hint_pair(EX("0x10", 0) WR("0x12", 1, "0x10", 0),
			       EX("0x10", 0) WR("0x12", 1, "0x10", 0) WR("0x12", 1, "0x10", 0), ""),
		     GB_QUIRK_SMC);
	/* Two reads the same: lackey's locked read, not QEMU's store. */
	cr_assert_eq(hint_pair(EX("0x10", 0) WR("0x12", 1, "0x10", 0),
			       EX("0x10", 0) WR("0x12", 1, "0x10", 0) WR("0x13", 1, "0x10", 0), ""),
		     GB_QUIRK_NONE);
}

Test(tdiff_hints, lackey_bittest_byte_not_normalised)
{
	const char *a = EX("0x10", 0) RD("0x100", 4, "0x10", 0), *b = EX("0x10", 0) RD("0x102", 1, "0x10", 0);
	cr_assert_eq(hint_pair(a, b, "bt"), GB_QUIRK_BITTEST);
	cr_assert_eq(hint_pair(a, b, "mov"), GB_QUIRK_NONE, "the binary says it is no bit-test");
	cr_assert_eq(hint_pair(a, EX("0x10", 0) RD("0x104", 1, "0x10", 0), "bt"), GB_QUIRK_NONE,
		     "the byte lies outside the unit");
	cr_assert_null(gb_quirk_info(GB_QUIRK_BITTEST)->normalise);
}

Test(tdiff_hints, qemu_maskmov_and_lackey_gather_lanes)
{
	cr_assert_eq(hint_pair(EX("0x10", 0) RD("0x100", 4, "0x10", 0) RD("0x108", 4, "0x10", 0),
			       EX("0x10", 0) RD("0x100", 8, "0x10", 0) RD("0x108", 8, "0x10", 0), "vmaskmovps"),
		     GB_QUIRK_MASKMOV);
	cr_assert_eq(hint_pair(EX("0x10", 0) RD("0x100", 4, "0x10", 0),
			       EX("0x10", 0) RD("0x100", 4, "0x10", 0) RD("0x7f00", 4, "0x10", 0), "vpgatherdd"),
		     GB_QUIRK_GATHER_LANE);
}

Test(tdiff_hints, lackey_rep_exec)
{
	struct side_fx fa, fb;
	side_open(&fa, EX("0x10", 0) RD("0x100", 1, "0x10", 0) EX("0x12", 1));
	side_open(&fb, EX("0x10", 0) RD("0x100", 1, "0x10", 0) EX("0x10", 1) EX("0x12", 2));
	gb_tside_pop(&fa.s, 1);
	gb_tside_pop(&fb.s, 1);
	struct gb_hint_in in = { .a = { gb_tside_at(&fa.s, 0) }, .b = { gb_tside_at(&fb.s, 0) }, .na = 0,
				 .nb = 1, .prev_a = &fa.s.prev, .prev_b = &fb.s.prev, .o = &raw_cmp, .mnem = "" };
	in.a[0] = NULL;
	cr_assert_eq(gb_hint_find(&in), GB_QUIRK_REP_EXEC);
	side_close(&fa);
	side_close(&fb);
}

Test(tdiff_hints, cpu_variant_names)
{
	cr_assert(gb_hint_cpu_variants("__strlen_evex", "__strlen_avx2"));
	cr_assert(gb_hint_cpu_variants("__memmove_avx512_unaligned_erms+0x40", "__memcpy_avx_unaligned_erms"),
		  "memmove and memcpy variants share addresses: the CPU token decides");
	cr_assert(gb_hint_cpu_variants("__strchr_sse2", "__strchr_avx2_rtm"));
	cr_assert(gb_hint_cpu_variants("__memcmp_sse4_1", "__memcmp_evex_movbe"));
	cr_assert_not(gb_hint_cpu_variants("__strlen_avx2", "__strlen_avx2+0x25"), "the same variant");
	cr_assert_not(gb_hint_cpu_variants("__strlen_avx2", "__memcpy_avx2_unaligned"), "the same CPU token");
	cr_assert_not(gb_hint_cpu_variants("traced", "traced_avx2"), "not glibc's __ names");
	cr_assert_not(gb_hint_cpu_variants("__avx2x_thing", "__strlen_sse2"), "avx2x is no token");
	cr_assert_not(gb_hint_cpu_variants(NULL, "__strlen_sse2"));
}

/* Control flow differs: A at one variant, B at another (or both inside
 * ifunc resolvers): cpu-ifunc, with its advice and no normalisation. */
Test(tdiff_hints, cpu_ifunc_at_a_control_flow_divergence)
{
	struct side_fx fa, fb;
	struct gb_tgroup a = group_of(EX("0x4307a0", 0), &fa), b = group_of(EX("0x4304a0", 0), &fb);
	struct gb_hint_in in = { .a = { &a }, .b = { &b }, .na = 1, .nb = 1, .o = &raw_cmp, .mnem = "mov",
				 .sym_a = "__strlen_evex", .sym_b = "__strlen_avx2" };
	cr_assert_eq(gb_hint_find(&in), GB_QUIRK_CPU_IFUNC);
	in.sym_a = "traced";
	cr_assert_eq(gb_hint_find(&in), GB_QUIRK_NONE, "one side is no variant");
	in.sym_a = "strlen+0x60";
	in.sym_b = "strlen+0x38";
	cr_assert_eq(gb_hint_find(&in), GB_QUIRK_NONE, "not known to be resolvers");
	in.ifunc_a = in.ifunc_b = true;
	cr_assert_eq(gb_hint_find(&in), GB_QUIRK_CPU_IFUNC, "both in an STT_GNU_IFUNC resolver");
	in.b[0] = &a;
	cr_assert_eq(gb_hint_find(&in), GB_QUIRK_NONE, "the same pc: no control flow divergence");
	const struct gb_quirk_info *qi = gb_quirk_info(GB_QUIRK_CPU_IFUNC);
	cr_assert_str_eq(qi->name, "cpu-ifunc");
	cr_assert_null(qi->normalise);
	cr_assert_not_null(qi->advice);
	side_close(&fa);
	side_close(&fb);
}

/* ---- reading ---- */

Test(tdiff_tline, writer_shape_and_general_json_agree)
{
	struct gb_tline x, y;
	const char *w = "{\"t\":\"fault\",\"vcpu\":2,\"addr\":\"0x7f12a000\",\"pc\":\"0x401008\",\"err\":\"0x6\",\"vt\":9}";
	const char *g = "{ \"vt\": 9, \"err\": \"0x6\", \"pc\": \"0x401008\", \"addr\": \"0x7f12a000\", \"vcpu\": 2, "
			"\"t\": \"fault\" }";
	cr_assert_eq(gb_tline_parse(w, strlen(w), &x), 0);
	cr_assert_eq(gb_tline_parse(g, strlen(g), &y), 0);
	cr_assert_eq(memcmp(&x, &y, sizeof(x)), 0);
	cr_assert_eq(x.type, GB_TL_FAULT);
	cr_assert_eq(x.addr, 0x7f12a000);
	cr_assert(x.has_err && x.err == 6);
	cr_assert_neq(gb_tline_parse("{\"x\":1}", 7, &x), 0);
	cr_assert_neq(gb_tline_parse("hello", 5, &x), 0);
}

static size_t count_lines(struct gb_treader *rd)
{
	const char *l;
	size_t n, k = 0;
	int r;
	while ((r = gb_treader__next(rd, &l, &n)) > 0)
		k++;
	cr_assert_eq(r, 0);
	return k;
}

/* n lines in frames of per lines, a skippable frame between them and one
 * at the end; the compressed bytes into path. */
static void write_zstd(const char *path, int n, int per, size_t cut)
{
	size_t cap = (size_t)n * 80 + 4096, len = 0;
	char *plain = malloc(cap), *z = malloc(cap * 2 + 4096);
	size_t zlen = 0;
	for (int i = 0; i < n; i++)
		len += (size_t)sprintf(plain + len, "{\"t\":\"exec\",\"vcpu\":0,\"pc\":\"0x%x\",\"vt\":%d}\n", 0x401000 + i, i);
	size_t off = 0;
	for (int i = 0; i < n; i += per) {
		size_t end = off;
		for (int k = 0; k < per && end < len; end++)
			k += plain[end] == '\n';
		zlen += ZSTD_compress(z + zlen, cap * 2 - zlen, plain + off, end - off, 3);
		off = end;
		zlen += ZSTD_writeSkippableFrame(z + zlen, 4096, "seek", 4, 0xE);
	}
	FILE *f = fopen(path, "w");
	fwrite(z, 1, cut && cut < zlen ? cut : zlen, f);
	fclose(f);
	free(plain);
	free(z);
}

Test(tdiff_treader, zstd_frames_and_skippable_frames)
{
	char path[] = "/tmp/gb-tdiff-zXXXXXX";
	close(mkstemp(path));
	write_zstd(path, 1000, 300, 0);
	struct gb_treader *rd;
	cr_assert_eq(gb_treader__open(path, 0, "test", &rd), 0);
	cr_assert_eq(gb_treader__format(rd), GB_TFORMAT_ZSTD);
	cr_assert_eq(count_lines(rd), 1000);
	struct gb_treader_stats st;
	gb_treader__stats(rd, &st);
	cr_assert_eq(st.frames, 4);
	cr_assert_eq(st.skippable, 4);
	cr_assert(!st.truncated);
	cr_assert_eq(gb_treader__rewind(rd), 0);
	cr_assert_eq(count_lines(rd), 1000, "a second pass reads the same");
	gb_treader__free(rd);
	unlink(path);
}

Test(tdiff_treader, cut_zstd_gives_the_complete_lines)
{
	char path[] = "/tmp/gb-tdiff-zXXXXXX";
	close(mkstemp(path));
	write_zstd(path, 1000, 500, 0);
	FILE *f = fopen(path, "r");
	fseek(f, 0, SEEK_END);
	long full = ftell(f);
	fclose(f);
	write_zstd(path, 1000, 500, (size_t)full - 300);   /* into the second frame */
	struct gb_treader *rd;
	cr_assert_eq(gb_treader__open(path, 0, "test", &rd), 0);
	size_t n = count_lines(rd);
	struct gb_treader_stats st;
	gb_treader__stats(rd, &st);
	cr_assert(st.truncated);
	cr_assert_geq(n, 500, "the whole first frame");
	cr_assert_lt(n, 1000);
	gb_treader__free(rd);
	unlink(path);
}

Test(tdiff_treader, pipe_read_once_kept_for_a_second_pass)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	const char *text = EX("0x10", 0) EX("0x14", 1) "\n" EX("0x18", 2);
	cr_assert_eq(write(p[1], text, strlen(text)), (ssize_t)strlen(text));
	close(p[1]);
	cr_assert_eq(dup2(p[0], STDIN_FILENO), STDIN_FILENO);
	struct gb_treader *rd;
	cr_assert_eq(gb_treader__open("-", GB_TREADER_REWIND, "test", &rd), 0);
	cr_assert_eq(gb_treader__format(rd), GB_TFORMAT_JSONL);
	cr_assert(!gb_treader__reopenable(rd));
	cr_assert_eq(count_lines(rd), 3, "the empty line is skipped");
	cr_assert_eq(gb_treader__rewind(rd), 0);
	cr_assert_eq(count_lines(rd), 3);
	gb_treader__free(rd);
}
