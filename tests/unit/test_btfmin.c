/* The cached cut of the kernel's BTF (user/probe/btfmin.c): made once per
 * boot and object with bpftool's min_core_btf, holding the kernel's own
 * offsets; a damaged one is dropped and the probe trap loads without it.
 * Needs root (the cache is root's) and bpftool: skipped with the reason
 * otherwise.  Run: .output/unit-tests --filter 'btfmin/...'. */
#include <criterion/criterion.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe/btfmin.h"
#include "probe/probetrap.h"
#include "probe/sampler.h"
#include "probetrap.skel.h"
#include "sample.skel.h"

static bool have_bpftool(void)
{
	return !system("command -v bpftool >/dev/null 2>&1 || test -x /usr/sbin/bpftool");
}

static void need_root_and_bpftool(void)
{
	if (geteuid())
		cr_skip_test("needs root: the cache is /run/gebpf/btf, root's");
	if (!have_bpftool())
		cr_skip_test("needs bpftool (gen min_core_btf)");
	unsetenv("GEBPF_BTF_CACHE");
}

/* The byte offset of task_struct's member name in btf, or -1. */
static long member_off(const struct btf *btf, const char *name)
{
	int id = btf__find_by_name_kind(btf, "task_struct", BTF_KIND_STRUCT);
	if (id < 0)
		return -1;
	const struct btf_type *t = btf__type_by_id(btf, id);
	const struct btf_member *m = btf_members(t);
	for (int i = 0; i < btf_vlen(t); i++, m++)
		if (!strcmp(btf__name_by_offset(btf, m->name_off), name))
			return (long)btf_member_bit_offset(t, i) / 8;
	return -1;
}

/* Overwrite the cut of name for obj with bytes that are no BTF; its path
 * in buf. */
static void damage(const char *name, const void *obj, size_t len, char *buf, size_t size)
{
	const char *p = gb_btfmin_path(name, obj, len, buf, size);
	cr_assert_not_null(p);
	int fd = open(p, O_WRONLY | O_TRUNC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "not BTF", 7), 7);
	close(fd);
}

Test(btfmin, made_once_with_the_kernels_offsets)
{
	char buf[256];
	size_t len = 0;
	const void *obj = probetrap_bpf__elf_bytes(&len);
	struct stat a, b;

	need_root_and_bpftool();
	const char *p = gb_btfmin_path("unittest", obj, len, buf, sizeof(buf));
	cr_assert_not_null(p, "no cut made");
	cr_assert_eq(stat(p, &a), 0);
	cr_assert_lt(a.st_size, 64 << 10, "%s: %lld bytes, not a cut", p, (long long)a.st_size);
	cr_assert_eq(a.st_mode & 022, 0, "the cut is writable by others");

	/* Its task_struct has the members the relocations use, at the
	 * running kernel's offsets. */
	struct btf *cut = btf__parse(p, NULL), *vm = btf__load_vmlinux_btf();
	cr_assert(cut && vm);
	for (const char *m = "blocked"; m; m = strcmp(m, "blocked") ? NULL : "pending") {
		cr_assert_geq(member_off(cut, m), 0, "task_struct.%s not in the cut", m);
		cr_assert_eq(member_off(cut, m), member_off(vm, m), "task_struct.%s", m);
	}
	btf__free(cut);
	btf__free(vm);

	/* Asked again: the same file, not made again. */
	char buf2[256];
	cr_assert_str_eq(gb_btfmin_path("unittest", obj, len, buf2, sizeof(buf2)), p);
	cr_assert_eq(stat(p, &b), 0);
	cr_assert(a.st_ino == b.st_ino && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec);

	/* Another object: another file. */
	char buf3[256];
	const char *q = gb_btfmin_path("unittest", obj, len - 1, buf3, sizeof(buf3));
	cr_assert(!q || strcmp(q, p));
	if (q)
		unlink(q);
	unlink(p);
}

Test(btfmin, turned_off_by_the_environment)
{
	char buf[256];
	size_t len = 0;
	const void *obj = probetrap_bpf__elf_bytes(&len);

	setenv("GEBPF_BTF_CACHE", "0", 1);
	cr_assert_null(gb_btfmin_path("unittest", obj, len, buf, sizeof(buf)));
	unsetenv("GEBPF_BTF_CACHE");
}

Test(btfmin, a_damaged_cut_is_dropped_and_the_trap_loads)
{
	char buf[256];
	size_t len = 0;
	const void *obj = probetrap_bpf__elf_bytes(&len);

	need_root_and_bpftool();
	damage("probetrap", obj, len, buf, sizeof(buf));
	const char *p = buf;

	struct gb_probetrap *t = gb_probetrap__new(&(struct gb_probetrap_opts){
		.tgid = getpid(), .quiet = true, .silent = true });
	cr_assert_not_null(t, "the probe trap did not load past a damaged cut");
	gb_probetrap__free(t);
	cr_assert_neq(access(p, F_OK), 0, "the damaged cut was kept");
	/* ... and the next load makes a good one again. */
	cr_assert_not_null(gb_btfmin_path("probetrap", obj, len, buf, sizeof(buf)));
	struct btf *cut = btf__parse(buf, NULL);
	cr_assert_not_null(cut);
	btf__free(cut);
}

/* The sampler's object alike: a damaged cut dropped, the load made with
 * the kernel's BTF; the fork follower (a raw tracepoint) loads either way. */
Test(btfmin, the_sampler_loads_past_a_damaged_cut)
{
	char buf[256];
	size_t len = 0;
	const void *obj = sample_bpf__elf_bytes(&len);
	pid_t self = getpid();

	need_root_and_bpftool();
	damage("sample", obj, len, buf, sizeof(buf));
	char p[256];
	snprintf(p, sizeof(p), "%s", buf);
	struct gb_sampler *s = gb_sampler__new(&(struct gb_sampler_opts){
		.pids = &self, .npids = 1, .stacks = GB_STACK_DWARF, .python = true });
	cr_assert_not_null(s, "the sampler did not load past a damaged cut");
	gb_sampler__free(s);
	cr_assert_neq(access(p, F_OK), 0, "the damaged cut was kept");
	/* made again, and used */
	cr_assert_not_null(gb_btfmin_path("sample", obj, len, buf, sizeof(buf)));
	s = gb_sampler__new(&(struct gb_sampler_opts){
		.pids = &self, .npids = 1, .stacks = GB_STACK_DWARF, .python = true });
	cr_assert_not_null(s);
	gb_sampler__free(s);
	cr_assert_eq(access(buf, F_OK), 0);
}
