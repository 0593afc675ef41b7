/* The snapshot as a value (user/snap/snapshot.h), without a process:
 * build one in memory, query it, save it, load it back, save again. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snap/snapshot.h"

#define PG 4096

static uint8_t *anon(size_t n)
{
	uint8_t *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert(p != MAP_FAILED);
	return p;
}

static void add_map(struct gb_snapshot *s, uint64_t start, uint64_t size, const char *perms,
		    const char *path, bool data)
{
	struct gb_snap_map *m = &s->maps[s->nmaps++];
	m->start = start;
	m->end = start + size;
	strcpy(m->perms, perms);
	m->path = strdup(path);
	m->data = data ? anon(size) : NULL;
}

/* Two threads; maps: a file map, two adjacent anonymous maps (with zero
 * pages), an unreadable one, [stack]. */
static struct gb_snapshot *build(void)
{
	struct gb_snapshot *s = gb_snapshot_alloc();
	s->owns_map_data = true;
	s->meta.pid = 42;
	s->meta.tid = 43;
	s->meta.vt = 7;
	s->meta.point = strdup("after 7");
	s->meta.kernel = strdup("test");
	s->meta.arch = strdup("amd64");
	s->meta.platform = strdup("linux");
	s->exe = strdup("/bin/true");
	strcpy(s->ps.fname, "true");
	s->ps.state = 't';
	s->nthreads = 2;
	s->threads = calloc(2, sizeof(*s->threads));
	for (int i = 0; i < 2; i++) {
		struct gb_snap_thread *t = &s->threads[i];
		t->tid = 42 + i;
		t->regs.rip = 0x401000 + i;
		t->regs.rsp = 0x7ffff000 - 64;
		t->regs.fs_base = 0x1234000 + i;
		t->fpregs.mxcsr = 0x1f80;
		t->xstate_len = 832;
		t->xstate = calloc(1, 832);
		t->xstate[576] = (uint8_t)(0xa0 + i);
		t->cursig = 5;
		t->siginfo[0] = 5;
	}
	s->maps = calloc(8, sizeof(*s->maps));
	add_map(s, 0x400000, PG, "r-xp", "/bin/true", true);
	add_map(s, 0x600000, 4 * PG, "rw-p", "", true);
	add_map(s, 0x604000, 2 * PG, "rw-p", "[heap]", true);
	add_map(s, 0x700000, 2 * PG, "---p", "", false);
	add_map(s, 0x7fff0000, 0xf000, "rw-p", "[stack]", true);
	memcpy(s->maps[0].data, "\x55\x48\x89\xe5", 4);
	memset(s->maps[1].data + PG, 0xab, PG);           /* page 1 data, 0/2/3 zero */
	memcpy(s->maps[1].data + 4 * PG - 3, "end", 3);
	memcpy(s->maps[2].data, "heap", 4);
	s->auxv_len = 32;
	s->auxv = calloc(1, 32);
	s->nfds = 1;
	s->fds = calloc(1, sizeof(*s->fds));
	s->fds[0].fd = 0;
	s->fds[0].target = strdup("/dev/null");
	s->fds[0].flags = 0x8000;
	gb_snapshot_set_var(s, "note", "hello");
	return s;
}

static void tmpname(char *buf, size_t len, const char *tag)
{
	snprintf(buf, len, "/tmp/gebpf-unit-%d-%s.core", getpid(), tag);
}

static uint8_t *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	cr_assert(fd >= 0, "open %s", path);
	struct stat st;
	fstat(fd, &st);
	uint8_t *b = malloc((size_t)st.st_size);
	cr_assert(read(fd, b, (size_t)st.st_size) == st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return b;
}

/* What the code under test printed on stderr so far (redirected). */
static void said(char *buf, size_t len)
{
	fflush(stderr);
	size_t n = fread(buf, 1, len - 1, cr_get_redirected_stderr());
	buf[n] = 0;
}


Test(snap_model, read_memory_crosses_maps_and_reports_holes, .init = cr_redirect_stderr)
{
	struct gb_snapshot *s = build();
	char buf[8], err[1024];
	cr_assert_eq(gb_snapshot_read_memory(s, 0x604000 - 3, buf, 7, "t"), 0);
	cr_assert_eq(memcmp(buf, "endheap", 7), 0);
	cr_assert_eq(gb_snapshot_read_memory(s, 0x500000, buf, 4, NULL), -EFAULT);  /* quiet */
	cr_assert_eq(gb_snapshot_read_memory(s, 0x500000, buf, 4, "t"), -EFAULT);
	cr_assert_eq(gb_snapshot_read_memory(s, 0x700010, buf, 4, "t"), -ENODATA);
	/* Running off the end of the last readable map into a gap. */
	cr_assert_eq(gb_snapshot_read_memory(s, 0x606000 - 2, buf, 4, "t"), -EFAULT);
	said(err, sizeof(err));
	cr_assert(!strncmp(err, "gebpf: t: 0x500000: not in any mapping of the snapshot\n", 55) &&
		  strstr(err, "\ngebpf: t: 0x700010: mapping ") && strstr(err, "has no bytes") &&
		  strstr(err, "\ngebpf: t: 0x606000: not in any mapping"), "%s", err);
	gb_snapshot_free(s);
}

Test(snap_model, write_memory_is_all_or_nothing)
{
	struct gb_snapshot *s = build();
	char buf[4];
	cr_assert_eq(gb_snapshot_write_memory(s, 0x604000, "HEAP", 4, NULL), 0);
	gb_snapshot_read_memory(s, 0x604000, buf, 4, NULL);
	cr_assert_eq(memcmp(buf, "HEAP", 4), 0);
	/* Crosses into the gap after [heap]: nothing is written. */
	cr_assert_eq(gb_snapshot_write_memory(s, 0x606000 - 2, "xxxx", 4, NULL), -EFAULT);
	gb_snapshot_read_memory(s, 0x606000 - 2, buf, 2, NULL);
	cr_assert_eq(buf[0], 0);
	cr_assert_eq(gb_snapshot_regs(s, 1)->rip, 0x401001);
	cr_assert_null(gb_snapshot_regs(s, 2));
	gb_snapshot_free(s);
}

Test(snap_model, save_load_roundtrip_is_byte_identical)
{
	char p1[128], p2[128];
	tmpname(p1, sizeof(p1), "a");
	tmpname(p2, sizeof(p2), "b");
	struct gb_snapshot *s = build(), *l;
	cr_assert_eq(gb_snapshot_save(s, p1), 0);
	struct stat st;
	cr_assert_eq(stat(p1, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	cr_assert_eq(gb_snapshot_load(p1, &l, NULL), 0);

	cr_assert_eq(l->nthreads, 2);
	cr_assert_eq(l->threads[1].tid, 43);
	cr_assert_eq(l->threads[1].regs.fs_base, 0x1234001);
	cr_assert_eq(l->threads[1].xstate_len, 832);
	cr_assert_eq(l->threads[1].xstate[576], 0xa1);
	cr_assert_eq(l->threads[0].fpregs.mxcsr, 0x1f80);
	cr_assert_eq(l->nmaps, 5);
	cr_assert_str_eq(l->maps[2].path, "[heap]");
	cr_assert_str_eq(l->maps[3].perms, "---p");
	cr_assert_null(l->maps[3].data);
	cr_assert_eq(l->meta.vt, 7);
	cr_assert_str_eq(l->meta.point, "after 7");
	cr_assert_str_eq(l->exe, "/bin/true");
	cr_assert_eq(l->nfds, 1);
	cr_assert_str_eq(l->fds[0].target, "/dev/null");
	cr_assert_eq(l->nvars, 1);
	cr_assert_str_eq(l->vars[0].value, "hello");
	cr_assert_str_eq(l->maps[1].sha256, s->maps[1].sha256);
	char buf[7];
	cr_assert_eq(gb_snapshot_read_memory(l, 0x604000 - 3, buf, 7, NULL), 0);
	cr_assert_eq(memcmp(buf, "endheap", 7), 0);

	cr_assert_eq(gb_snapshot_save(l, p2), 0);
	size_t n1, n2;
	uint8_t *b1 = slurp(p1, &n1), *b2 = slurp(p2, &n2);
	cr_assert_eq(n1, n2);
	cr_assert_eq(memcmp(b1, b2, n1), 0, "save(load(x)) differs from x");
	free(b1);
	free(b2);
	/* The file is mapped read-only: a write makes its pages private copies,
	 * and the file itself does not change. */
	cr_assert_eq(gb_snapshot_write_memory(l, 0x604000 - 3, "ENDHEAP", 7, "t"), 0);
	cr_assert_eq(gb_snapshot_read_memory(l, 0x604000 - 3, buf, 7, NULL), 0);
	cr_assert_eq(memcmp(buf, "ENDHEAP", 7), 0);
	b1 = slurp(p1, &n1);
	cr_assert_eq(memcmp(b1, b2 = slurp(p2, &n2), n1), 0, "writing to a loaded snapshot changed its file");
	free(b1);
	free(b2);
	gb_snapshot_free(l);
	gb_snapshot_free(s);
	unlink(p1);
	unlink(p2);
}

Test(snap_model, zero_pages_are_holes)
{
	char p[128];
	tmpname(p, sizeof(p), "holes");
	struct gb_snapshot *s = build();
	/* A big, mostly zero map: 4 MiB with one non-zero page. */
	struct gb_snap_map *m = &s->maps[s->nmaps - 1];
	munmap(m->data, m->end - m->start);
	m->start = 0x7f0000000000;
	m->end = m->start + (4 << 20);
	m->data = anon(4 << 20);
	m->data[12345] = 1;
	cr_assert_eq(gb_snapshot_save(s, p), 0);
	struct stat st;
	stat(p, &st);
	cr_assert_gt(st.st_size, 4 << 20);
	cr_assert_lt((long)st.st_blocks * 512, 1 << 20, "zero pages were written: %ld bytes allocated",
		     (long)st.st_blocks * 512);
	gb_snapshot_free(s);
	unlink(p);
}

Test(snap_model, same_state_same_bytes)
{
	char p1[128], p2[128];
	tmpname(p1, sizeof(p1), "d1");
	tmpname(p2, sizeof(p2), "d2");
	struct gb_snapshot *a = build(), *b = build();
	cr_assert_eq(gb_snapshot_save(a, p1), 0);
	cr_assert_eq(gb_snapshot_save(b, p2), 0);
	size_t n1, n2;
	uint8_t *b1 = slurp(p1, &n1), *b2 = slurp(p2, &n2);
	cr_assert(n1 == n2 && !memcmp(b1, b2, n1));
	/* One byte of state more: a different file. */
	b->maps[2].data[100] = 1;
	cr_assert_eq(gb_snapshot_save(b, p2), 0);
	free(b2);
	b2 = slurp(p2, &n2);
	cr_assert(n1 == n2 && memcmp(b1, b2, n1));
	free(b1);
	free(b2);
	gb_snapshot_free(a);
	gb_snapshot_free(b);
	unlink(p1);
	unlink(p2);
}

Test(snap_model, bad_files_are_clear_errors, .init = cr_redirect_stderr)
{
	char p[128], q[128], err[2048];
	struct gb_snapshot *l;
	tmpname(p, sizeof(p), "bad");
	tmpname(q, sizeof(q), "good");
	cr_assert_eq(gb_snapshot_load("/nonexistent/x.core", &l, NULL), -ENOENT);
	cr_assert_null(l);
	FILE *f = fopen(p, "w");
	fputs("hello, not a core\n", f);
	fputs("padding padding padding padding padding padding padding padding\n", f);
	fclose(f);
	cr_assert_eq(gb_snapshot_load(p, &l, "show"), -EINVAL);
	/* Truncated: a good file cut in the middle of its data. */
	struct gb_snapshot *s = build();
	cr_assert_eq(gb_snapshot_save(s, q), 0);
	struct stat st;
	stat(q, &st);
	cr_assert_eq(truncate(q, st.st_size - PG), 0);
	cr_assert_eq(gb_snapshot_load(q, &l, NULL), -EINVAL);
	/* A failed save leaves nothing under the final name. */
	cr_assert_lt(gb_snapshot_save(s, "/nonexistent-dir/x.core"), 0);
	/* One line each, naming the file (and the caller's context). */
	said(err, sizeof(err));
	char want[600];
	snprintf(want, sizeof(want), "gebpf: show: %s: not an ELF file\ngebpf: %s: truncated", p, q);
	cr_assert(!strncmp(err, "gebpf: /nonexistent/x.core: No such file or directory\n", 54) &&
		  strstr(err, want) && strstr(err, "\ngebpf: /nonexistent-dir/x.core: cannot create"),
		  "%s", err);
	int lines = 0;
	for (char *c = err; *c; c++)
		lines += *c == '\n';
	cr_assert_eq(lines, 4, "%s", err);
	gb_snapshot_free(s);
	unlink(p);
	unlink(q);
}
