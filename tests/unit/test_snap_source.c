/* The capture's memory source on this very process (process_vm_readv and
 * /proc/self/pagemap need no ptrace): pages never populated are holes and
 * are not read, populated pages are read even when they hold zeros, and a
 * page nothing can read is zero and counted. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "snap/source.h"

#define PG 4096

static struct gb_snap_map map_of(uint8_t *p, size_t len, bool sparse)
{
	struct gb_snap_map m;
	memset(&m, 0, sizeof(m));
	m.start = (uint64_t)(uintptr_t)p;
	m.end = m.start + len;
	m.live = true;
	m.sparse = sparse;
	return m;
}

Test(snap_source, holes_are_not_read)
{
	size_t len = 64u << 20;
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	cr_assert_neq(p, MAP_FAILED);
	madvise(p, len, MADV_NOHUGEPAGE);
	p[3 * PG + 5] = 7;
	*(volatile uint8_t *)(p + 5 * PG) = 0;   /* populated, all zeros */
	struct gb_snap_map m = map_of(p, len, true);
	struct gb_snap_src *src = gb_snap_src__new(getpid());
	cr_assert_not_null(src);
	uint8_t *buf = malloc(1u << 20);
	bool holes;
	uint64_t failed = 0;

	memset(buf, 0xff, 1u << 20);
	int64_t n = gb_snap_src__read(src, &m, 0, buf, 1u << 20, &holes, &failed);
	cr_assert_eq(n, 2, "read %ld pages, want the 2 populated ones", (long)n);
	cr_assert(!holes);
	cr_assert_eq(buf[3 * PG + 5], 7);
	for (size_t i = 0; i < (1u << 20); i++)
		if (i != 3 * PG + 5)
			cr_assert_eq(buf[i], 0, "byte %zu is 0x%x, not zero", i, buf[i]);

	memset(buf, 0xff, 1u << 20);
	n = gb_snap_src__read(src, &m, 32u << 20, buf, 1u << 20, &holes, &failed);
	cr_assert_eq(n, 0);
	cr_assert(holes, "a range with no page must be reported as holes");
	cr_assert_eq(buf[0], 0xff, "holes must not be read nor zeroed");
	cr_assert_eq(failed, 0);
	/* The process did not gain the pages we looked at. */
	unsigned char vec[16];
	cr_assert_eq(mincore(p + (32u << 20), 16 * PG, vec), 0);
	for (int i = 0; i < 16; i++)
		cr_assert_eq(vec[i] & 1, 0, "page %d of the hole became resident", i);

	/* Not sparse: every page is read. */
	m.sparse = false;
	n = gb_snap_src__read(src, &m, 0, buf, 1u << 20, &holes, &failed);
	cr_assert_eq(n, 256);
	gb_snap_src__free(src);
	free(buf);
	munmap(p, len);
}

Test(snap_source, unreadable_page_is_zero_and_counted)
{
	uint8_t *p = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(p, MAP_FAILED);
	memset(p, 0x11, 8 * PG);
	munmap(p + 4 * PG, PG);   /* a hole in the middle of the "map" */
	struct gb_snap_map m = map_of(p, 8 * PG, false);
	struct gb_snap_src *src = gb_snap_src__new(getpid());
	uint8_t buf[8 * PG];
	bool holes;
	uint64_t failed = 0;
	memset(buf, 0xff, sizeof(buf));
	int64_t n = gb_snap_src__read(src, &m, 0, buf, sizeof(buf), &holes, &failed);
	cr_assert_eq(n, 7);
	cr_assert_eq(failed, 1);
	for (size_t i = 0; i < sizeof(buf); i++)
		cr_assert_eq(buf[i], i / PG == 4 ? 0 : 0x11, "byte %zu", i);
	gb_snap_src__free(src);
	munmap(p, 8 * PG);
}

/* Saving a captured snapshot whose bytes are still in the process: a map of
 * which no page can be read ends up with no bytes (the layout is redone), an
 * unreadable page of another is zeros and counted in vars.unreadable_pages,
 * and the result is the same on every save. */
Test(snap_source, save_redoes_the_layout_for_unreadable_maps)
{
	uint8_t *p = mmap(NULL, 16 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(p, MAP_FAILED);
	memset(p, 0x22, 8 * PG);
	munmap(p + 4 * PG, PG);          /* one unreadable page in map 0 */
	munmap(p + 8 * PG, 8 * PG);      /* map 1: nothing readable */
	struct gb_snapshot *s = gb_snapshot_alloc();
	s->meta.pid = s->meta.tid = 1;
	s->meta.point = strdup("attach");
	s->meta.kernel = strdup("test");
	s->meta.arch = strdup("amd64");
	s->meta.platform = strdup("linux");
	s->exe = strdup("/bin/true");
	s->nthreads = 1;
	s->threads = calloc(1, sizeof(*s->threads));
	s->unwound = true;
	s->maps = calloc(2, sizeof(*s->maps));
	s->nmaps = 2;
	s->maps[0] = map_of(p, 8 * PG, false);
	s->maps[1] = map_of(p + 8 * PG, 8 * PG, false);
	for (int i = 0; i < 2; i++) {
		strcpy(s->maps[i].perms, "rw-p");
		s->maps[i].path = strdup("");
	}
	s->src = gb_snap_src__new(getpid());
	char a[] = "/tmp/gebpf-src-XXXXXX", b[] = "/tmp/gebpf-src-XXXXXX";
	close(mkstemp(a));
	close(mkstemp(b));
	cr_assert_eq(gb_snapshot_save(s, a), 0);
	cr_assert_eq(gb_snapshot_save(s, b), 0);
	cr_assert(!gb_snap_map_has_bytes(&s->maps[1]), "a map with no readable page must have no bytes");

	struct gb_snapshot *l;
	cr_assert_eq(gb_snapshot_load(a, &l, NULL), 0);
	cr_assert_not_null(l->maps[0].data);
	cr_assert_null(l->maps[1].data);
	for (size_t i = 0; i < 8 * PG; i++)
		cr_assert_eq(l->maps[0].data[i], i / PG == 4 ? 0 : 0x22, "byte %zu", i);
	cr_assert_eq(l->nvars, 1);
	cr_assert_str_eq(l->vars[0].key, "unreadable_pages");
	cr_assert_str_eq(l->vars[0].value, "1");
	gb_snapshot_free(l);

	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	int ca, cb;
	do {
		ca = fgetc(fa);
		cb = fgetc(fb);
		cr_assert_eq(ca, cb, "two saves of one snapshot differ");
	} while (ca != EOF);
	fclose(fa);
	fclose(fb);
	unlink(a);
	unlink(b);
	gb_snapshot_free(s);
	munmap(p, 4 * PG);
	munmap(p + 5 * PG, 3 * PG);
}
