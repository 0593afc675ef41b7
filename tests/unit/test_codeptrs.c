/* gb_codeptrs_find() (user/sym/codeptrs.c): the addresses of a range that
 * a file's data holds, in a non-PIE program's jump table (its file bytes)
 * in this PIE test binary's table of function pointers (relocations), and
 * the addresses its code takes (lea, a switch's table of offsets). */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sym/codeptrs.h"
#include "sym/elfsyms.h"
#include "unit_progs.h"

static bool has(const uint64_t *v, size_t n, uint64_t x)
{
	for (size_t k = 0; k < n; k++)
		if (v[k] == x)
			return true;
	return false;
}

Test(codeptrs, a_jump_tables_labels_from_the_files_data)
{
	char path[PATH_MAX];
	struct gb_elfsyms es;
	cr_assert(!unit_prog_path("switch", path, sizeof(path)), "%s not built (make progs)", path);
	cr_assert_eq(gb_elfsyms_load(path, &es), 0);
	const struct gb_elfsym *y = gb_elfsyms_find(&es, "traced");
	cr_assert(y && y->size);
	uint64_t lo = y->value, hi = y->value + y->size - 1, off;
	/* the table, independently: traced's `jmp *disp32(,%reg,8)` (ff 24 xx
	 * with SIB base 101: no base), 9 labels (cases 0..8; 9 is the default,
	 * a branch before the jump) */
	FILE *f = fopen(path, "rb");
	cr_assert(f);
	uint8_t code[4096];
	cr_assert_eq(gb_elfsyms_to_offset(&es, lo, &off), 0);
	cr_assert(y->size <= sizeof(code) && fseek(f, (long)off, SEEK_SET) == 0 &&
		  fread(code, 1, y->size, f) == y->size);
	int64_t table = 0;
	for (size_t k = 0; k + 7 <= y->size && !table; k++)
		if (code[k] == 0xff && code[k + 1] == 0x24 && (code[k + 2] & 0xc7) == 0xc5) {
			int32_t d;
			memcpy(&d, code + k + 3, 4);
			table = d;
		}
	cr_assert_neq(table, 0, "no jump table in traced");
	uint64_t labels[9];
	cr_assert_eq(gb_elfsyms_to_offset(&es, (uint64_t)table, &off), 0);
	cr_assert(fseek(f, (long)off, SEEK_SET) == 0 && fread(labels, 8, 9, f) == 9);
	fclose(f);
	uint64_t *v;
	size_t n;
	cr_assert_eq(gb_codeptrs_find(path, lo, hi, &v, &n), 0);
	for (size_t k = 0; k < n; k++) {
		cr_assert(v[k] >= lo && v[k] <= hi, "0x%lx outside the range", (unsigned long)v[k]);
		cr_assert(!k || v[k] > v[k - 1], "ascending, unique");
	}
	for (int k = 0; k < 9; k++)
		cr_assert(labels[k] >= lo && labels[k] <= hi && has(v, n, labels[k]),
			  "label %d (0x%lx) not found", k, (unsigned long)labels[k]);
	free(v);
	gb_elfsyms_free(&es);
}

/* Three functions only this table names. */
__attribute__((noinline, used)) static int cp_a(int x) { return x + 1; }
__attribute__((noinline, used)) static int cp_b(int x) { return x * 3; }
__attribute__((noinline, used)) static int cp_c(int x) { return x - 5; }
static int (*const volatile cp_table[])(int) = { cp_b, cp_a, cp_c };

Test(codeptrs, function_pointers_of_a_pie_file_from_its_relocations)
{
	Dl_info di;
	cr_assert(dladdr((void *)cp_a, &di) && di.dli_fname);
	uint64_t base = (uint64_t)di.dli_fbase;
	uint64_t a = (uint64_t)cp_a - base, b = (uint64_t)cp_b - base, c = (uint64_t)cp_c - base;
	uint64_t lo = a < b ? (a < c ? a : c) : (b < c ? b : c);
	uint64_t hi = a > b ? (a > c ? a : c) : (b > c ? b : c);
	cr_assert_eq(cp_table[1](1), 2);
	uint64_t *v;
	size_t n;
	cr_assert_eq(gb_codeptrs_find("/proc/self/exe", lo, hi, &v, &n), 0);
	cr_assert(has(v, n, a) && has(v, n, b) && has(v, n, c), "%zu found", n);
	free(v);
	cr_assert_eq(gb_codeptrs_find("/proc/self/exe", hi + 1, hi + 1, &v, &n), 0);
	free(v);
}

/* Code addresses only the code names: a lea's target, and the entries of a
 * switch's table of 32-bit offsets from its start (GCC's PIC jump table)
 * that a lea names. */
extern uint8_t cp_sw[], cp_l1[], cp_l2[], cp_l3[], cp_sw_end[];
__asm__(
	".text\n"
	".globl cp_sw, cp_l1, cp_l2, cp_l3, cp_sw_end\n"
	"cp_sw:\n"
	"	lea cp_tab(%rip), %rsi\n"
	"	movslq (%rsi,%rdi,4), %rax\n"
	"	add %rsi, %rax\n"
	"	jmp *%rax\n"
	"cp_l1:	mov $1, %eax\n"
	"	ret\n"
	"cp_l2:	lea cp_l3(%rip), %rax\n"
	"	ret\n"
	"cp_l3:	mov $3, %eax\n"
	"	ret\n"
	"cp_sw_end:\n"
	".section .rodata\n"
	".balign 4\n"
	"cp_tab: .long cp_l1 - cp_tab, cp_l2 - cp_tab\n"
	".text\n");

Test(codeptrs, lea_targets_and_a_switchs_table_of_offsets_from_the_code)
{
	Dl_info di;
	cr_assert(dladdr((void *)cp_sw, &di) && di.dli_fname);
	uint64_t base = (uint64_t)di.dli_fbase, lo = (uint64_t)cp_sw - base;
	uint64_t hi = (uint64_t)cp_sw_end - 1 - base;
	uint64_t *v;
	size_t n;
	cr_assert_eq(gb_codeptrs_find("/proc/self/exe", lo, hi, &v, &n), 0);
	cr_assert(has(v, n, (uint64_t)cp_l1 - base), "table entry 0 not found (%zu found)", n);
	cr_assert(has(v, n, (uint64_t)cp_l2 - base), "table entry 1 not found (%zu found)", n);
	cr_assert(has(v, n, (uint64_t)cp_l3 - base), "the lea's target not found (%zu found)", n);
	free(v);
}
