/* --set REG=VALUE and --poke ADDR=HEX on a snapshot value (resume/resume.h),
 * and the refusal of a snapshot without a thread before any process starts. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "resume/resume.h"

static struct gb_snapshot *one_map(size_t nthreads)
{
	struct gb_snapshot *s = gb_snapshot_alloc();
	cr_assert(s);
	s->owns_map_data = true;
	s->nthreads = nthreads;
	s->threads = calloc(nthreads, sizeof(*s->threads));
	s->maps = calloc(1, sizeof(*s->maps));
	s->nmaps = 1;
	s->maps[0].start = 0x600000;
	s->maps[0].end = 0x602000;
	strcpy(s->maps[0].perms, "rw-p");
	s->maps[0].path = strdup("");
	s->maps[0].data = mmap(NULL, 0x2000, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert(s->maps[0].data != MAP_FAILED);
	return s;
}

Test(resume_edit, set_registers_by_note_name, .init = cr_redirect_stderr)
{
	struct gb_snapshot *s = one_map(1);
	char err[256];
	cr_assert_eq(gb_resume_edit_reg(s, "rsi=1"), 0);
	cr_assert_eq(gb_resume_edit_reg(s, "rip=0x401000"), 0);
	cr_assert_eq(gb_resume_edit_reg(s, "fs_base=0x7ffff7d8a740"), 0);
	cr_assert_eq(s->threads[0].regs.rsi, 1);
	cr_assert_eq(s->threads[0].regs.rip, 0x401000);
	cr_assert_eq(s->threads[0].regs.fs_base, 0x7ffff7d8a740ull);
	cr_assert_eq(gb_resume_edit_reg(s, "xmm0=1"), -EINVAL);
	fflush(stderr);
	err[fread(err, 1, sizeof(err) - 1, cr_get_redirected_stderr())] = 0;
	const char *want = "gebpf: resume: --set xmm0=1: xmm0: no such register";
	char *nl = strchr(err, '\n');
	cr_assert(!strncmp(err, want, strlen(want)) && nl && !nl[1], "%s", err);
	cr_assert_eq(gb_resume_edit_reg(s, "rax"), -EINVAL);
	cr_assert_eq(gb_resume_edit_reg(s, "rax=zz"), -EINVAL);
	gb_snapshot_free(s);
}

Test(resume_edit, poke_bytes_across_pages)
{
	struct gb_snapshot *s = one_map(1);
	cr_assert_eq(gb_resume_edit_poke(s, "0x600ffe=0102abFF"), 0);
	cr_assert_eq(memcmp(s->maps[0].data + 0xffe, "\x01\x02\xab\xff", 4), 0);
	cr_assert_eq(gb_resume_edit_poke(s, "0x600000=123"), -EINVAL);
	cr_assert_eq(gb_resume_edit_poke(s, "0x600000=zz"), -EINVAL);
	cr_assert_eq(gb_resume_edit_poke(s, "0x600000="), -EINVAL);
	cr_assert_neq(gb_resume_edit_poke(s, "0x601fff=0000"), 0); /* past the map */
	gb_snapshot_free(s);
}

Test(resume_edit, threadless_refused_before_launch, .init = cr_redirect_stderr)
{
	struct gb_snapshot *s = one_map(0);
	struct gb_tracee t;
	memset(&t, 0, sizeof(t));
	cr_assert_eq(gb_resume_restore(s, &t, "resume: x.core", NULL), -EINVAL);
	fflush(stderr);
	cr_assert_stderr_eq_str("gebpf: resume: x.core: the snapshot has no thread\n");
	cr_assert_eq(t.pid, 0);
	gb_snapshot_free(s);
}

Test(resume_edit, new_pidns_refuses_a_pid_1_before_launch, .init = cr_redirect_stderr)
{
	struct gb_snapshot *s = one_map(1);
	struct gb_tracee t;
	memset(&t, 0, sizeof(t));
	s->meta.pid = 1;
	struct gb_restore_opts o = { .new_pidns = true };
	cr_assert_eq(gb_resume_restore(s, &t, "resume: x.core", &o), -EINVAL);
	fflush(stderr);
	cr_assert_stderr_eq_str("gebpf: resume: x.core: --new-pidns: pid 1 cannot be kept (the new "
				"namespace's init is gebpf's)\n");
	cr_assert_eq(t.pid, 0);
	gb_snapshot_free(s);
}
