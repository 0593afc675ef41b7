/* gebpf diff by value (tdiff/values.h), the trace reader's value fields
 * (record/tline.h) and --normalise qemu's merge of split values (norm.h). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode/decode.h"
#include "record/tline.h"
#include "tdiff/group.h"
#include "tdiff/norm.h"
#include "tdiff/values.h"

/* A record from a trace line, as the diff's stream makes it. */
static struct gb_trec rec(const char *line)
{
	struct gb_trec x = { 0 };
	cr_assert_eq(gb_tline_parse(line, strlen(line), &x.l), 0, "%s", line);
	if (x.l.val)
		x.val = strndup(x.l.val, x.l.val_len);
	if (x.l.regs)
		x.regs = strndup(x.l.regs, x.l.regs_len);
	x.l.val = x.l.regs = NULL;
	return x;
}

static void group(struct gb_tgroup *g, const char *const *lines, size_t n)
{
	memset(g, 0, sizeof(*g));
	for (size_t i = 0; i < n; i++) {
		struct gb_trec x = rec(lines[i]);
		cr_assert_eq(gb_tgroup_push(g, &x), 0);
	}
}

Test(tdiff_values, the_reader_keeps_val_and_regs)
{
	const char *e = "{\"t\":\"exec\",\"vcpu\":0,\"pc\":\"0x40167e\",\"regs\":{\"rax\":\"0x5\","
			"\"eflags\":\"0x246\"},\"vt\":7}";
	struct gb_tline l;
	cr_assert_eq(gb_tline_parse(e, strlen(e), &l), 0);
	cr_expect_eq(l.type, GB_TL_EXEC);
	cr_expect_eq(l.pc, 0x40167e);
	cr_expect_eq(l.vt, 7);
	cr_assert(l.regs);
	cr_expect(!strncmp(l.regs, "{\"rax\":\"0x5\",\"eflags\":\"0x246\"}", l.regs_len));
	const char *r = "{\"t\":\"read\",\"vcpu\":1,\"addr\":\"0x10\",\"size\":16,"
			"\"val\":\"0x100000000\",\"pc\":\"0x401000\",\"vt\":3}";
	cr_assert_eq(gb_tline_parse(r, strlen(r), &l), 0);
	cr_expect_eq(l.size, 16);
	cr_expect_eq(l.val_len, strlen("0x100000000"));
	cr_expect(!strncmp(l.val, "0x100000000", l.val_len));
	/* a regs line is a type of its own; a plain line has neither field */
	const char *g = "{\"t\":\"regs\",\"vcpu\":0,\"regs\":{\"rax\":\"0x0\"},\"vt\":0}";
	cr_assert_eq(gb_tline_parse(g, strlen(g), &l), 0);
	cr_expect_eq(l.type, GB_TL_REGS);
	const char *p = "{\"t\":\"exec\",\"vcpu\":0,\"pc\":\"0x1\",\"vt\":0}";
	cr_assert_eq(gb_tline_parse(p, strlen(p), &l), 0);
	cr_expect_null(l.regs);
	cr_expect_null(l.val);
	/* fields in another order (another tool's line) */
	const char *o = "{\"t\":\"exec\",\"regs\":{\"rbx\":\"0x2\"},\"pc\":\"0x9\",\"vcpu\":0,\"vt\":1}";
	cr_assert_eq(gb_tline_parse(o, strlen(o), &l), 0);
	cr_expect_eq(l.pc, 9);
	cr_assert(l.regs);
	cr_expect(!strncmp(l.regs, "{\"rbx\":\"0x2\"}", l.regs_len));
}

Test(tdiff_values, registers_both_name_and_values_both_have)
{
	const char *a[] = {
		"{\"t\":\"exec\",\"vcpu\":0,\"pc\":\"0x401000\",\"regs\":{\"rax\":\"0x1\",\"ymm0\":\"0x5\"},\"vt\":0}",
		"{\"t\":\"read\",\"vcpu\":0,\"addr\":\"0x10\",\"size\":8,\"val\":\"0x7\",\"pc\":\"0x401000\",\"vt\":0}",
	};
	const char *b[] = {
		"{\"t\":\"exec\",\"vcpu\":0,\"pc\":\"0x401000\",\"regs\":{\"rax\":\"0x2\"},\"vt\":0}",
		"{\"t\":\"read\",\"vcpu\":0,\"addr\":\"0x10\",\"size\":8,\"val\":\"0x8\",\"pc\":\"0x401000\",\"vt\":0}",
	};
	struct gb_tgroup x, y;
	group(&x, a, 2);
	group(&y, b, 2);
	struct gb_vdiff d;
	cr_assert_eq(gb_values_compare(&x, &y, NULL, NULL, NULL, NULL, &d), 2);
	cr_expect_str_eq(d.d[0].what, "rax");
	cr_expect_str_eq(d.d[0].a, "0x1");
	cr_expect_str_eq(d.d[0].b, "0x2");
	cr_expect_str_eq(d.d[1].what, "read 1");
	cr_expect_eq(d.d[1].size, 8);
	cr_expect_eq(d.d[0].kind, GB_VK_NONE);
	/* the same values: nothing (ymm0, which B does not name, is not compared) */
	cr_expect_eq(gb_values_compare(&x, &x, NULL, NULL, NULL, NULL, &d), 0);
	cr_expect(d.any_values);
	gb_tgroup_free(&x);
	gb_tgroup_free(&y);
}

static void one_exec(struct gb_tgroup *g, const char *regs)
{
	char line[256];
	snprintf(line, sizeof(line), "{\"t\":\"exec\",\"vcpu\":0,\"pc\":\"0x401000\",\"regs\":%s,\"vt\":0}", regs);
	const char *l[] = { line };
	group(g, l, 1);
}

Test(tdiff_values, kinds_an_emulator_differs_in)
{
	struct gb_insn in;
	struct gb_tgroup x, y;
	struct gb_vdiff d;
	/* bsf leaves CF, OF, SF, AF, PF undefined: only those differ */
	const uint8_t bsf[] = { 0x48, 0x0f, 0xbc, 0xc3 };
	cr_assert_eq(gb_decode(0x401000, bsf, sizeof(bsf), &in), 0);
	one_exec(&x, "{\"rax\":\"0x3\",\"eflags\":\"0x202\"}");
	one_exec(&y, "{\"rax\":\"0x3\",\"eflags\":\"0xa87\"}");
	cr_assert_eq(gb_values_compare(&x, &y, &in, NULL, NULL, NULL, &d), 1);
	cr_expect_eq(d.d[0].kind, GB_VK_UNDEF_FLAGS);
	gb_tgroup_free(&y);
	/* ZF is defined by bsf: no such kind */
	one_exec(&y, "{\"rax\":\"0x3\",\"eflags\":\"0x242\"}");
	cr_assert_eq(gb_values_compare(&x, &y, &in, NULL, NULL, NULL, &d), 1);
	cr_expect_eq(d.d[0].kind, GB_VK_NONE);
	gb_tgroup_free(&x);
	gb_tgroup_free(&y);
	/* fsin; then the same two values again: carried */
	const uint8_t fsin[] = { 0xd9, 0xfe };
	cr_assert_eq(gb_decode(0x401000, fsin, sizeof(fsin), &in), 0);
	one_exec(&x, "{\"st0\":\"0x3ffdf57743a2582f7f44\"}");
	one_exec(&y, "{\"st0\":\"0x3ffdf57743a2582f7800\"}");
	struct gb_vmemory mem = { 0 };
	cr_assert_eq(gb_values_compare(&x, &y, &in, NULL, NULL, &mem, &d), 1);
	cr_expect_eq(d.d[0].kind, GB_VK_X87_TRANS);
	cr_assert_eq(gb_values_compare(&x, &y, NULL, NULL, NULL, &mem, &d), 1);
	cr_expect_eq(d.d[0].kind, GB_VK_CARRIED);
	gb_tgroup_free(&x);
	gb_tgroup_free(&y);
	cr_expect_eq(gb_vkind_parse("x87-transcendental"), GB_VK_X87_TRANS);
	cr_expect_eq(gb_vkind_parse("nonsense"), GB_VK_NONE);
}

Test(tdiff_values, typed_as_the_instruction_means_them)
{
	char buf[256];
	gb_values_typed("eflags", "0x246", 8, "imul", buf, sizeof(buf));
	cr_expect_str_eq(buf, "flags PF ZF IF");
	gb_values_typed("st0", "0x3fff8000000000000000", 10, "fld1", buf, sizeof(buf));
	cr_expect_str_eq(buf, "x87 1");
	gb_values_typed("xmm0", "0x3ff6a09e667f3bcd", 16, "sqrtsd", buf, sizeof(buf));
	cr_expect_str_eq(buf, "double 1.4142135623730951");
	gb_values_typed("xmm1", "0x4000000030000000200000001", 16, "paddd", buf, sizeof(buf));
	cr_expect_str_eq(buf, "4 x i32 [1, 2, 3, 4]");
	gb_values_typed("rax", "0xffffffffffffffff", 8, "mov", buf, sizeof(buf));
	cr_expect_str_eq(buf, "-1");
	gb_values_typed("read 1", "0x3fe0000000000000", 8, "fld", buf, sizeof(buf));
	cr_expect_str_eq(buf, "double 0.5");
	gb_values_typed("xmm2", "0x3f8000003f800000", 16, "addps", buf, sizeof(buf));
	cr_expect_str_eq(buf, "4 x float [1, 1, 0, 0]");
}

Test(tdiff_values, qemu_pieces_merge_their_values)
{
	const char *l[] = {
		"{\"t\":\"exec\",\"vcpu\":0,\"pc\":\"0x401000\",\"regs\":{},\"vt\":0}",
		"{\"t\":\"write\",\"vcpu\":0,\"addr\":\"0x1000\",\"size\":8,\"val\":\"0x5\",\"pc\":\"0x401000\",\"vt\":0}",
		"{\"t\":\"write\",\"vcpu\":0,\"addr\":\"0x1008\",\"size\":2,\"val\":\"0x3fff\",\"pc\":\"0x401000\",\"vt\":0}",
	};
	struct gb_tgroup g;
	group(&g, l, 3);
	cr_assert_eq(gb_norm_apply_rule(GB_RULE_SPLIT, &g), 1);
	cr_assert_eq(g.n, 2);
	cr_expect_eq(g.r[1].l.size, 10);
	cr_expect_str_eq(g.r[1].val, "0x3fff0000000000000005");
	gb_tgroup_free(&g);
	/* a zero upper piece adds no digits */
	const char *z[] = {
		"{\"t\":\"read\",\"vcpu\":0,\"addr\":\"0x1000\",\"size\":8,\"val\":\"0x5\",\"pc\":\"0x401000\",\"vt\":0}",
		"{\"t\":\"read\",\"vcpu\":0,\"addr\":\"0x1008\",\"size\":8,\"val\":\"0x0\",\"pc\":\"0x401000\",\"vt\":0}",
	};
	group(&g, z, 2);
	cr_assert_eq(gb_norm_apply_rule(GB_RULE_SPLIT, &g), 1);
	cr_expect_str_eq(g.r[0].val, "0x5");
	gb_tgroup_free(&g);
}
